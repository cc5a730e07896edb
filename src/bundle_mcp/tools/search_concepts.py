"""search_concepts: one literal, caseless substring over id, title, description, tags and body."""

from __future__ import annotations

import functools
import operator
from array import array
from bisect import bisect_right
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate, compress, islice, repeat
from typing import Any, Literal, cast, overload

from ..cancel import CancelToken
from ..derived import Slot, of_snapshot
from ..model import Concepts, Document, FoldedFields, Snapshot, revision_value
from ..okf.folding import fold
from ..okf.temporal import reference_from
from ..packed_text import HeldText
from ..toolspec import CallContext, ToolSpec
from ._body_words import kept_index
from ._common import Cards, invalid_field, limit_from
from ._filters import concept_filter_from

NAME = "search_concepts"
DESCRIPTION = (
    "Start here for a known term: concepts whose ID, title, description, a tag or body "
    "contains ONE literal substring, caseless: not an AND of words, not fuzzy. Ranked id > "
    "title > description > tags > body, then ID. If truncated, raise limit (up to 100) or "
    "refine: no cursor, an omitted hit was not inspected. Then read_concept; list_concepts "
    "if no term is known."
)

# Field priorities: the highest one that contains the query is the hit's match.
ID, TITLE_FIELD, DESCRIPTION_FIELD, TAGS, BODY = 6, 5, 4, 3, 1
MATCH_NAMES = {
    ID: "id", TITLE_FIELD: "title", DESCRIPTION_FIELD: "description", TAGS: "tags", BODY: "body"
}


# Joins a short column's strings (``JoinedColumn``); a needle holding it is scanned per string.
_JOIN = "\x00"
# Past this many hits in a joined column, mapping each hit to its string costs more than the
# scan of the column's strings in one pass of C.
_FEW_HITS = 64
# The texts a body scan first searches as written, to tell whether the rest are worth it
# (``SearchFields._scanned``): a few milliseconds at most.
_SAMPLED_TEXTS = 256


@dataclass(frozen=True, slots=True)
class JoinedColumn:
    """A short column's strings joined by ``_JOIN``: one ``str.count`` over it tells in C
    whether any string holds a needle without ``_JOIN`` (most needles are in none of the IDs,
    titles, descriptions or tags, and one count is a tenth of a pass over the strings)."""

    strings: tuple[str, ...]
    text: str
    starts: array[int]  # where each string starts in ``text``

    @classmethod
    def of(cls, strings: tuple[str, ...]) -> JoinedColumn:
        # Each string's length and its separator, summed in C (a restarted server's first
        # search makes the columns of every concept).
        starts = array("L", accumulate(map((1).__add__, map(len, strings[:-1])), initial=0)) \
            if strings else array("L")
        return cls(strings, _JOIN.join(strings), starts)

    def holding(self, needle: str) -> Iterable[int]:
        """The positions of the strings that contain ``needle``, in order."""
        strings = self.strings
        # An empty needle is in every string; one holding _JOIN could span two of them.
        hits = self.text.count(needle) if needle and _JOIN not in needle else _FEW_HITS + 1
        if hits == 0:
            return ()
        if hits > _FEW_HITS:
            return compress(range(len(strings)), map(operator.contains, strings, repeat(needle)))
        found = []
        text, starts = self.text, self.starts
        at = text.find(needle)
        while at >= 0:
            n = bisect_right(starts, at) - 1
            found.append(n)
            # On from the end of string n: a needle without _JOIN never spans two strings.
            at = text.find(needle, starts[n] + len(strings[n]))
        return found


@dataclass(frozen=True, slots=True)
class SearchFields:
    """Every concept's folded fields, one column per field, in concept ID order: a query scans
    each column in one pass of C (``map(operator.contains, …)``, or one ``str.count`` over a
    short column joined) instead of one Python step per concept and field, which took twice as
    long at the file cap. Bodies are not kept folded (``FoldedFields``): an ASCII one is
    folded as it is checked and let go, one at a time, so a scan of every body costs a
    lowercase of each on top of the search. The bodies a query checks can be narrowed by the
    body word index (``_body_words``), which leaves a few to fold for most needles."""

    concept_ids: tuple[str, ...]
    documents: Sequence[Document]  # read back (_read_back), each built when asked for
    ids: JoinedColumn
    titles: JoinedColumn
    descriptions: JoinedColumn
    tags: JoinedColumn  # every tag of every concept, each on its own
    tag_owners: tuple[int, ...]  # the position of the concept each tag belongs to
    positions: Mapping[str, int]  # concept ID → its position in the columns
    # Read back with the columns: the ASCII texts an earlier process found, which then need
    # no document built to be scanned (None: every body is asked of its document).
    known: KnownTexts | None = None
    # Made from the documents when a scan first needs them (body_kinds): a memo.
    kinds: BodyKinds | None = None

    def body_kinds(self, token: CancelToken) -> BodyKinds:
        """The bodies by kind (:class:`BodyKinds`), made on first use from the texts known
        and the documents of the rest."""
        kinds = self.kinds
        if kinds is None:
            kinds = BodyKinds.of(self.documents, token, self.known)
            # A memo of a pure function of the documents: a race keeps one of two equal values.
            object.__setattr__(self, "kinds", kinds)
        return kinds

    def priorities(
        self, needle: str, token: CancelToken, body_candidates: Collection[str] | None = None,
        *, holders: bool = False,
    ) -> list[int]:
        """Per concept, the priority of its highest field containing ``needle`` (0: none):
        the columns are scanned lowest priority first, so a higher field overwrites.

        ``body_candidates``: the only concepts whose body may contain ``needle`` (the body
        word index's answer, ``_body_words``), or with ``holders`` exactly those whose body
        does (none is checked); ``None``: every body is checked."""
        token.check()
        found = [0] * len(self.concept_ids)
        documents = self.documents
        if body_candidates is None:
            for n in self._scanned(needle, token):
                found[n] = BODY
        else:
            for n in map(self.positions.__getitem__, body_candidates):
                if holders or documents[n].folded_body_holds(needle):
                    found[n] = BODY
        token.check()
        owners = self.tag_owners
        for n in self.tags.holding(needle):
            found[owners[n]] = TAGS
        for priority, column in ((DESCRIPTION_FIELD, self.descriptions),
                                 (TITLE_FIELD, self.titles), (ID, self.ids)):
            token.check()
            for n in column.holding(needle):
                found[n] = priority
        return found

    def _scanned(self, needle: str, token: CancelToken) -> Iterable[int]:
        """The positions of every concept whose folded body holds ``needle``, each kind of body
        the way it is cheapest.

        An ASCII text is made once (``HeldText``) and searched as written first: a
        needle that is its own fold, found in a text as written, is in its fold at the same
        place, so only the texts where it is not are folded. Most needles that come this far
        (no word of them narrows the bodies) are common, mostly written in lowercase: then most
        texts are never folded. A needle mostly written otherwise (a capital, as in a heading)
        would cost a search as written on top of the fold of nearly every text: when fewer than
        half of the first texts hold it as written, the rest are folded straight away.
        """
        kinds = self.body_kinds(token)
        texts, starts, positions = kinds.ascii_texts, kinds.ascii_starts, kinds.ascii_positions
        if needle.isascii():  # else in no ASCII text, nor in its fold
            as_written = fold(needle) == needle
            held = 0
            for k, packed in enumerate(texts):
                if not k % _SAMPLED_TEXTS:
                    token.check()
                    if k == _SAMPLED_TEXTS:
                        as_written = as_written and held * 2 >= k
                text, start = packed.text(), starts[k]
                if as_written and text.find(needle, start) >= 0:
                    held += 1
                    yield positions[k]
                # ASCII text folds to text of the same length (``fold``): found at or after
                # the body's start is found in the body's fold.
                elif fold(text).find(needle, start) >= 0:
                    yield positions[k]
        token.check()
        yield from compress(kinds.kept_positions,
                            map(operator.contains, kinds.kept_bodies, repeat(needle)))
        documents = self.documents
        yield from (n for n in kinds.other_positions if documents[n].folded_body_holds(needle))


@dataclass(frozen=True, slots=True)
class KnownTexts:
    """The concepts whose text an earlier process found ASCII (kept with the columns, for the
    revision): their positions in the columns, ascending, each text's length and where its
    body starts in it. A restarted server's scan reads such a text from its file without
    building the document (``Concepts.held_text``): its warm-up then builds no document."""

    concepts: Concepts
    concept_ids: tuple[str, ...]
    positions: array[int]
    lengths: array[int]
    starts: array[int]

    def held(self, k: int) -> HeldText | None:
        """The ``k``-th known text, or ``None`` when its document must hold it."""
        return self.concepts.held_text(self.concept_ids[self.positions[k]], self.lengths[k])


@dataclass(frozen=True, slots=True)
class BodyKinds:
    """The concepts' bodies in three kinds, each scanned its own way
    (``SearchFields._scanned``); positions in the columns. An ASCII text (the document's own,
    held compressed or in its file: a scan reads each in turn) folds to the text's offsets, so
    the body's fold is the text's from the body's start on; a non-ASCII body's fold is kept by
    its document; an ASCII body after non-ASCII frontmatter is cut out and folded."""

    ascii_texts: tuple[HeldText, ...]
    ascii_starts: array[int]
    ascii_positions: tuple[int, ...]
    kept_bodies: tuple[str, ...]
    kept_positions: tuple[int, ...]
    other_positions: tuple[int, ...]

    @classmethod
    def of(cls, documents: Sequence[Document], token: CancelToken,
           known: KnownTexts | None = None) -> BodyKinds:
        """From each document: whether its text is ASCII (known without reading it), else
        whether its body's fold is kept (``FoldedFields.kept_body``). A text ``known`` to be
        ASCII is held without building its document."""
        ascii_texts: list[HeldText] = []
        ascii_starts = array("L")
        ascii_positions: list[int] = []
        kept_bodies: list[str] = []
        kept_positions: list[int] = []
        other_positions: list[int] = []
        known_positions = known.positions if known is not None else array("L")
        k = 0
        for n in range(len(documents)):
            if not n % _SAMPLED_TEXTS:
                token.check()
            if k < len(known_positions) and known_positions[k] == n:
                assert known is not None
                held = known.held(k)
                start = known.starts[k]
                k += 1
                if held is not None:
                    ascii_texts.append(held)
                    ascii_starts.append(start)
                    ascii_positions.append(n)
                    continue
            doc = documents[n]
            if doc.held.ascii:
                ascii_texts.append(doc.held)
                ascii_starts.append(doc.body_start)
                ascii_positions.append(n)
                continue
            kept = doc.kept_folded_body
            if kept is not None:
                kept_bodies.append(kept)
                kept_positions.append(n)
            else:
                other_positions.append(n)
        return cls(tuple(ascii_texts), ascii_starts, tuple(ascii_positions), tuple(kept_bodies),
                   tuple(kept_positions), tuple(other_positions))


def _fields(snapshot: Snapshot, token: CancelToken) -> SearchFields:
    """The snapshot's columns: read back when an earlier process kept them for its revision
    (then no document is built for them), else built from every concept and kept."""
    return revision_value(snapshot, STORED_COLUMNS, functools.partial(_read_back, snapshot),
                          lambda: _built(snapshot, token), _kept_form)


# The name the columns are kept under (InboundHint.keep_json).
STORED_COLUMNS = "search-columns"


def _kept_form(fields: SearchFields) -> dict[str, Any]:
    """What :func:`_read_back` reads: the folded columns, not the concept IDs (the
    snapshot's, in the same order), and of the bodies only which texts are ASCII, with their
    lengths and where their bodies start (:class:`KnownTexts`; a scan reads the texts)."""
    ascii_texts = [(n, doc) for n, doc in enumerate(fields.documents) if doc.held.ascii]
    return {
        "ids": fields.ids.strings, "titles": fields.titles.strings,
        "descriptions": fields.descriptions.strings, "tags": fields.tags.strings,
        "tag_owners": fields.tag_owners,
        "ascii_positions": [n for n, _ in ascii_texts],
        "ascii_lengths": [len(doc.held) for _, doc in ascii_texts],
        "ascii_starts": [doc.body_start for _, doc in ascii_texts],
    }


def _read_back(snapshot: Snapshot, kept: Any) -> SearchFields | None:
    """The columns :func:`_kept_form` kept, over ``snapshot``'s concepts, or ``None`` unless
    every column has the concepts' length and the tags' owners are in order. The documents
    are the snapshot's, built when a query asks for them: a rare word's holders, or every one
    for a scan (which then sorts their bodies by kind, :class:`BodyKinds`)."""
    if not isinstance(kept, dict):
        return None
    concept_ids = tuple(snapshot.concepts)
    count = len(concept_ids)
    strings: list[Any] = [kept.get(name) for name in ("ids", "titles", "descriptions", "tags")]
    owners: Any = kept.get("tag_owners")
    if not (all(_of(column, str) for column in strings) and _of(owners, int)):
        return None
    ids, titles, descriptions, tags = strings
    if (any(len(column) != count for column in (ids, titles, descriptions))
            or len(owners) != len(tags)
            or any(map(operator.gt, owners, islice(owners, 1, None)))
            or (owners and (owners[0] < 0 or owners[-1] >= count))):
        return None
    known = _known_texts(snapshot, concept_ids, kept)
    if known is False:
        return None
    return SearchFields(
        concept_ids, _Documents(snapshot.concepts, concept_ids),
        JoinedColumn.of(tuple(ids)), JoinedColumn.of(tuple(titles)),
        JoinedColumn.of(tuple(descriptions)), JoinedColumn.of(tuple(tags)), tuple(owners),
        {c: n for n, c in enumerate(concept_ids)}, known,
    )


def _known_texts(snapshot: Snapshot, concept_ids: tuple[str, ...], kept: dict[str, Any]
                 ) -> KnownTexts | None | Literal[False]:
    """The ASCII texts :func:`_kept_form` kept; ``None`` when it kept none (columns an earlier
    version kept: every body is then asked of its document), ``False`` when they are not
    ascending positions of these concepts, each with a length and a body start within it."""
    lists = [kept.get(name) for name in ("ascii_positions", "ascii_lengths", "ascii_starts")]
    if all(found is None for found in lists):
        return None
    if not all(_of(found, int) for found in lists):
        return False
    positions, lengths, starts = cast(list[list[int]], lists)
    if (len(lengths) != len(positions) or len(starts) != len(positions)
            or any(map(operator.ge, positions, islice(positions, 1, None)))
            or (positions and (positions[0] < 0 or positions[-1] >= len(concept_ids)))
            or any(start < 0 or start > length
                   for start, length in zip(starts, lengths, strict=True))):
        return False
    concepts = snapshot.concepts
    if not isinstance(concepts, Concepts):
        return None  # documents handed in built (no file to read a text from)
    return KnownTexts(concepts, concept_ids, array("L", positions), array("L", lengths),
                      array("L", starts))


def _of(value: Any, kind: type) -> bool:
    """Whether ``value`` is a list of ``kind`` (JSON: a bool is no int)."""
    # The items' types as a set, in C: every item's type is ``kind`` exactly.
    return isinstance(value, list) and set(map(type, value)) <= {kind}


class _Documents(Sequence[Document]):
    """The columns' documents, by position, each the snapshot's, built when first asked for."""

    __slots__ = ("_concepts", "_ids")

    def __init__(self, concepts: Mapping[str, Document], ids: tuple[str, ...]) -> None:
        self._concepts = concepts
        self._ids = ids

    def __len__(self) -> int:
        return len(self._ids)

    @overload
    def __getitem__(self, n: int) -> Document: ...
    @overload
    def __getitem__(self, n: slice) -> tuple[Document, ...]: ...

    def __getitem__(self, n: int | slice) -> Document | tuple[Document, ...]:
        if isinstance(n, slice):
            return tuple(map(self._concepts.__getitem__, self._ids[n]))
        return self._concepts[self._ids[n]]


def _built(snapshot: Snapshot, token: CancelToken) -> SearchFields:
    concept_ids: list[str] = []
    documents: list[Document] = []
    folded: list[FoldedFields] = []
    tags: list[str] = []
    owners: list[int] = []
    for n, (concept_id, doc) in enumerate(snapshot.concepts.items()):
        token.check()
        fields = doc.folded
        concept_ids.append(concept_id)
        documents.append(doc)
        folded.append(fields)
        tags.extend(fields.tags)
        owners.extend(repeat(n, len(fields.tags)))
    return SearchFields(
        tuple(concept_ids), tuple(documents),
        JoinedColumn.of(tuple(f.concept_id for f in folded)),
        JoinedColumn.of(tuple(f.title for f in folded)),
        JoinedColumn.of(tuple(f.description for f in folded)),
        JoinedColumn.of(tuple(tags)), tuple(owners), {c: n for n, c in enumerate(concept_ids)},
    )


def _warm_fields(snapshot: Snapshot, token: CancelToken) -> None:
    fields = of_snapshot(snapshot, SEARCH_FIELDS, lambda: _fields(snapshot, token),
                         check=token.check)
    # Sorted now, so that a scan finds them sorted: from the documents the columns were built
    # from, or, read back, from the texts known (no document built) and the few others'.
    fields.body_kinds(token)


SEARCH_FIELDS: Slot[SearchFields] = Slot(
    "search_fields", "snapshot",
    "every concept's folded ID, title, description, tags and body as columns, for "
    "search_concepts",
    _warm_fields,
)
SLOTS = (SEARCH_FIELDS,)


def run(call: CallContext, params: dict[str, Any]) -> dict[str, Any]:
    snapshot, token = call.snapshot, call.token
    query = params["query"]
    if not query.strip():
        raise invalid_field("$.query", "query must contain a non-whitespace character")
    limit = limit_from(params)
    ref = reference_from(params)
    concept_filter = concept_filter_from(snapshot, params, ref)
    needle = fold(query)  # never trimmed: leading or trailing spaces are part of the literal
    columns = of_snapshot(snapshot, SEARCH_FIELDS, lambda: _fields(snapshot, token),
                          check=token.check)
    index = kept_index(snapshot)  # built by the warm-up; without it every body is checked
    holders = index.holders(needle) if index is not None else None
    if holders is not None:  # one word, found in the index alone
        priorities = columns.priorities(needle, token, holders, holders=True)
    else:
        candidates = index.candidates(needle) if index is not None else None
        priorities = columns.priorities(needle, token, candidates)
    matches: list[tuple[int, str]] = []
    for n in compress(range(len(priorities)), priorities):
        # The filter comes before the limit: total counts admitted matches only.
        if concept_filter is not None and not concept_filter.admits(columns.documents[n], ref):
            continue
        matches.append((priorities[n], columns.concept_ids[n]))
    matches.sort(key=lambda m: (-m[0], m[1]))
    cards = Cards(snapshot, ref)
    hits = []
    for priority, concept_id in matches[:limit]:
        token.check()
        hits.append({"concept": cards.get(concept_id), "match": MATCH_NAMES[priority]})
    answer: dict[str, Any] = {
        "query": query,
        "as_of": ref.as_of,
        "temporal_profile": ref.profile,
        "total": len(matches),
        "truncated": len(matches) > limit,
        "hits": hits,
    }
    if concept_filter is not None:  # without filters the answer keeps its old bytes
        answer["filters"] = concept_filter.echo()
    return answer


def match_priority(needle: str, concept_id: str, doc: Any) -> int:
    """The priority of the highest field containing ``needle``; 0 when none does.

    The rule in one concept's terms: :meth:`SearchFields.priorities` answers it for every
    concept at once, and ``tests/test_search_columns.py`` holds the two to the same answers.
    """
    folded = doc.folded
    if needle in folded.concept_id:
        return ID
    if needle in folded.title:
        return TITLE_FIELD
    if needle in folded.description:
        return DESCRIPTION_FIELD
    # Each tag on its own: a query never spans two tags.
    if any(needle in tag for tag in folded.tags):
        return TAGS
    if doc.folded_body_holds(needle):
        return BODY
    return 0


SPEC = ToolSpec(
    name=NAME,
    title="Search concepts",
    toolset="read",
    read_only=True,
    description=DESCRIPTION,
    run=run,
)
