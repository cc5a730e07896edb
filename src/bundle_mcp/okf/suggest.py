"""'Did you mean': which concepts an ID that names nothing was probably meant to name.

The one rule behind the ``did_you_mean`` diagnostics of every ``concept_not_found``. It only ever
*suggests*: no tool resolves a guess, so a caller always retries with an ID it chose.

Texts are compared *loosely*: folded (:func:`~bundle_mcp.okf.folding.fold`, the folding every
search uses) with each run of ``-``, ``_`` and white space read as one space, so ``Order_Items``,
``order-items`` and ``order items`` are one text. The requested text loses a trailing ``.md`` and
leading ``/`` or ``./`` first (a path where an ID was expected). Candidates come in four tiers,
each ordered by concept ID, and a concept is listed once, in its first tier:

1. ``case``: the whole ID is loosely equal (``Tables/Orders`` → ``tables/orders``);
2. ``stem``: the last segment of the request is loosely equal to a concept's file stem
   (``orders`` or ``reports/orders`` → ``tables/orders``);
3. ``title``: the request, or its last segment, is loosely equal to a concept's frontmatter
   ``title`` (the format has no aliases; untitled concepts are matched by ID and stem only, so
   that building the index never parses Markdown);
4. ``close``: difflib's similarity (``SequenceMatcher.ratio``, the measure of
   ``difflib.get_close_matches``) of the loose request or its last segment against the loose
   IDs, stems and titles is at least :data:`CLOSE_CUTOFF`; ordered by the best ratio, then ID.
   Only texts sharing at least a third of the request's character bigrams are compared.

At most :data:`MAX_SUGGESTIONS`; never the requested text itself; only concepts under
``project`` when a call is scoped to one (outside it a scoped caller sees nothing, suggestions
included).

The index of loose texts and their bigrams is kept per snapshot (:data:`CONCEPT_SUGGESTIONS`),
built by the warm-up; a request longer than :data:`MAX_CLOSE_CHARS` gets the exact tiers only.
After a change, the new snapshot's index is the previous snapshot's updated with the files that
differ (:func:`updated_index`), when that snapshot is still held with its index, else the
nearest earlier capture's that is (:meth:`~bundle_mcp.model.Snapshot.earlier`): asking for a
concept just deleted is the typical miss, and building the index anew cost 0.3 s at 10,000
concepts.
"""

from __future__ import annotations

import difflib
import json
import math
import re
import sys
import types
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import cast

from ..cancel import CancelToken
from ..derived import Slot, kept_earlier, of_snapshot, unrevised_name
from ..errors import Diagnostic, did_you_mean
from ..model import Document, Snapshot
from .folding import fold
from .graph import in_project
from .ids import concept_id_for_path
from .names import concept_name

__all__ = [
    "CLOSE_CUTOFF",
    "CONCEPT_SUGGESTIONS",
    "SLOTS",
    "MAX_SUGGESTIONS",
    "Suggestion",
    "SuggestionIndex",
    "build_index",
    "did_you_mean_diagnostics",
    "loose",
    "suggest",
    "updated_index",
]


def _warm(snapshot: Snapshot, token: CancelToken) -> object:
    return index_of(snapshot, token.check)


CONCEPT_SUGGESTIONS: Slot[SuggestionIndex] = Slot(
    "concept_suggestions", "snapshot",
    "loose IDs, stems and titles of every concept, for 'did you mean' on concept_not_found "
    "(SuggestionIndex); warmed, and after a change updated from the previous snapshot's",
    _warm,
    carried=True,
)
SLOTS = (CONCEPT_SUGGESTIONS,)

MAX_SUGGESTIONS = 5
CLOSE_CUTOFF = 0.75
# A close candidate shares at least 1/SHARED_BIGRAMS of the query's character bigrams. A typo
# (one letter changed, added, dropped or two swapped) breaks at most three of them, so this
# lets through every near miss of any length worth suggesting while skipping most of a bundle.
SHARED_BIGRAMS = 3
# Close matching costs up to the product of two lengths per text compared; a longer request
# (IDs may have 4,096 characters) gets the exact tiers only.
MAX_CLOSE_CHARS = 512
# Cancellation is checked this often while close matches are scored.
_CHECK_EVERY = 1024
# RapidFuzz's similarity bounds difflib's ratio from above in exact arithmetic; the two are
# doubles computed differently, so the bound is widened by far more than their rounding
# (measured: at most one unit in the last place apart where they are equal).
_BOUND_SLACK = 1e-9

_SEPARATORS = re.compile(r"[-_\s]+")


def loose(text: str) -> str:
    """``text`` folded, each run of ``-``, ``_`` and white space one space, trimmed."""
    return _SEPARATORS.sub(" ", fold(text)).strip()


@dataclass(frozen=True, slots=True)
class Suggestion:
    concept_id: str
    path: str
    name: str  # the display name (okf.names.concept_name)
    reason: str  # case | stem | title | close


@dataclass(frozen=True, slots=True)
class SuggestionIndex:
    """The loose texts of one snapshot's concepts, and the concepts that carry each."""

    by_id: Mapping[str, tuple[str, ...]]
    by_stem: Mapping[str, tuple[str, ...]]
    by_title: Mapping[str, tuple[str, ...]]
    # Every loose ID, stem and title, numbered ("" at a number an update let go, for a later
    # update to reuse); and each character bigram (:func:`bigrams`) → the numbers of the texts
    # holding it, in no particular order, for close matches. Numbers in arrays, not the texts
    # in tuples: a quarter of the size at 30,000 texts (two-byte numbers, :func:`_number_code`),
    # and one text added or dropped still touches only its own bigrams' entries
    # (:func:`updated_index`). Which concepts carry a text is read from the three tables, not
    # kept a fourth time.
    texts: tuple[str, ...]
    postings: Mapping[str, array[int]]

    def carriers(self, text: str) -> tuple[str, ...]:
        """The IDs carrying the loose ``text`` as their ID, stem or title (sorted)."""
        return tuple(sorted({*self.by_id.get(text, ()), *self.by_stem.get(text, ()),
                             *self.by_title.get(text, ())}))

    def carried(self, text: str) -> bool:
        return text in self.by_id or text in self.by_stem or text in self.by_title


def bigrams(text: str) -> frozenset[str]:
    """The character pairs of ``text`` padded with a space at each end (so that a one-letter
    text has two, and first and last letters count)."""
    padded = f" {text} "
    return frozenset(padded[i : i + 2] for i in range(len(padded) - 1))


def _keys(concept_id: str, doc: Document) -> tuple[str, str, str]:
    """The loose ID, stem and title one concept is found by (an empty one finds nothing)."""
    return (loose(concept_id), loose(concept_id.rsplit("/", 1)[-1]),
            loose(_title(doc)))


def _title(doc: Document) -> str:
    # fm_value: one key read without freezing the whole frontmatter of every concept.
    value = doc.fm_value("title")
    return value if isinstance(value, str) else ""


def build_index(snapshot: Snapshot) -> SuggestionIndex:
    by_id: dict[str, list[str]] = {}
    by_stem: dict[str, list[str]] = {}
    by_title: dict[str, list[str]] = {}
    numbers: dict[str, int] = {}  # each loose text → its number, in order of first appearance
    postings: dict[str, array[int]] = {}
    code = _number_code(3 * len(snapshot.concepts))  # at most three texts a concept
    for concept_id, doc in snapshot.concepts.items():  # sorted by ID, so each list is too
        for table, key in zip((by_id, by_stem, by_title), _keys(concept_id, doc), strict=True):
            if key:
                table.setdefault(key, []).append(concept_id)
                if key not in numbers:
                    numbers[key] = number = len(numbers)
                    for pair in bigrams(key):
                        postings.setdefault(pair, array(code)).append(number)
    return SuggestionIndex(
        by_id=_frozen(by_id),
        by_stem=_frozen(by_stem),
        by_title=_frozen(by_title),
        texts=tuple(numbers),
        postings=types.MappingProxyType(postings),
    )


def _number_code(count: int) -> str:
    """The array type code of ``count`` text numbers: two bytes while they fit (up to about
    20,000 concepts), else at least four."""
    if count <= 1 << 16:
        return "H"
    return "I" if array("I").itemsize >= 4 else "L"


def _frozen(table: dict[str, list[str]]) -> Mapping[str, tuple[str, ...]]:
    # One list at a time becomes its tuple, so the lists and the tuples are never all held.
    for key, ids in table.items():
        table[key] = tuple(ids)  # type: ignore[assignment]
    return types.MappingProxyType(cast(dict[str, tuple[str, ...]], table))


# An update touches each changed concept's texts and their bigrams; past this share of the
# documents changed, building the index anew is as quick.
MAX_UPDATED_SHARE = 0.1


def updated_index(
    earlier: SuggestionIndex, before: Snapshot, after: Snapshot
) -> SuggestionIndex | None:
    """``after``'s index from ``before``'s (``earlier``), touching only the concepts of the
    files that differ between the two captures: equal to :func:`build_index` of ``after``.
    ``None`` when too much changed to gain anything (the caller builds it anew)."""
    changed = after.documents.differing(before.documents)
    size = max(len(before.documents), len(after.documents))
    if len(changed) > max(1, int(size * MAX_UPDATED_SHARE)):
        return None
    gone = [(cid, _keys(cid, before.concepts[cid])) for cid in _concepts_at(before, changed)]
    new = [(cid, _keys(cid, after.concepts[cid])) for cid in _concepts_at(after, changed)]
    tables = [dict(earlier.by_id), dict(earlier.by_stem), dict(earlier.by_title)]
    # The removed concepts' keys first, then the added ones (a changed concept is both).
    for entries, change in ((gone, _without), (new, _with)):
        for concept_id, keys in entries:
            for table, key in zip(tables, keys, strict=True):
                if key:
                    change(table, key, concept_id)

    def carried(text: str) -> bool:
        return any(text in table for table in tables)

    dropped = {t for _, keys in gone for t in keys if t and not carried(t)}
    added = sorted({t for _, keys in new for t in keys if t and not earlier.carried(t)})
    texts = list(earlier.texts)
    # The dropped texts' numbers and those let go before are free: the added texts
    # take the free numbers first, so the texts grow no longer than the most ever held.
    # Found with list.index (a scan in C): a Python loop over every text cost about 3 ms at
    # 30,000 texts on each edit's first "did you mean".
    gone_numbers = {texts.index(t) for t in dropped}
    free = sorted(gone_numbers | set(_positions(texts, "")))
    for number in gone_numbers:
        texts[number] = ""
    placed = dict(zip(added, free, strict=False))
    for text in added[len(placed):]:
        placed[text] = len(texts)
        texts.append("")
    for text, number in placed.items():
        texts[number] = text
    code = next((a.typecode for a in earlier.postings.values()), "H")
    if len(texts) > 1 << (8 * array(code).itemsize):
        return None  # more texts than the earlier arrays can number
    postings = dict(earlier.postings)
    touched: dict[str, list[int]] = {}
    for text in dropped:
        for pair in bigrams(text):
            touched.setdefault(pair, [])
    for text, number in placed.items():
        for pair in bigrams(text):
            touched.setdefault(pair, []).append(number)
    for pair, more in touched.items():
        kept = array(code, postings.get(pair, ()))
        for number in gone_numbers:
            # A text's number is in its bigram's posting once (bigrams are a set), and
            # copying the array then removing it scans in C: filtering it a number at a
            # time was about 5 ms for one deleted concept's bigrams at 30,000 texts.
            if number in kept:
                kept.remove(number)
        kept.extend(more)
        if kept:
            postings[pair] = kept
        else:
            postings.pop(pair, None)
    return SuggestionIndex(
        by_id=types.MappingProxyType(tables[0]),
        by_stem=types.MappingProxyType(tables[1]),
        by_title=types.MappingProxyType(tables[2]),
        texts=tuple(texts),
        postings=types.MappingProxyType(postings),
    )


def _positions(items: list[str], value: str) -> Iterator[int]:
    """The positions of ``value`` in ``items``, in order."""
    start = 0
    while True:
        try:
            start = items.index(value, start)
        except ValueError:
            return
        yield start
        start += 1


def _concepts_at(snapshot: Snapshot, paths: Iterable[str]) -> list[str]:
    """The concepts of ``snapshot`` at these paths (a file that is no concept, or that does not
    parse, has none)."""
    out = []
    for path in paths:
        concept_id = concept_id_for_path(path)
        if concept_id in snapshot.concepts and snapshot.concepts[concept_id].path == path:
            out.append(concept_id)
    return out


def _without(table: dict[str, tuple[str, ...]], key: str, concept_id: str) -> None:
    rest = tuple(c for c in table.get(key, ()) if c != concept_id)
    if rest:
        table[key] = rest
    else:
        table.pop(key, None)


def _with(table: dict[str, tuple[str, ...]], key: str, concept_id: str) -> None:
    table[key] = tuple(sorted({*table.get(key, ()), concept_id}))


def index_of(snapshot: Snapshot, check: Callable[[], None] | None = None) -> SuggestionIndex:
    """The snapshot's suggestion index, built on first use and kept with the snapshot: updated
    from its predecessor's when that one is still held and has its index."""
    index: SuggestionIndex = of_snapshot(
        snapshot, CONCEPT_SUGGESTIONS, lambda: _build_or_update(snapshot), check=check
    )
    return index


def _build_or_update(snapshot: Snapshot) -> SuggestionIndex:
    # Updating an earlier capture's index saves the build (0.3 s at 10,000 concepts): after an
    # edit, a miss may come before the edit's warm-up got this far (derived.kept_earlier).
    found = kept_earlier(snapshot, CONCEPT_SUGGESTIONS)
    if found is not None:
        before, earlier = found
        updated = updated_index(earlier, before, snapshot)
        if updated is not None:
            return updated
    store = snapshot.inbound
    decided_by = unrevised_name(snapshot, "concept-suggestions", None)
    if store is not None:
        kept = _read_index(store.stored_bytes(snapshot.revision, STORED_INDEX), decided_by,
                           snapshot)
        if kept is not None:
            return kept
    index = build_index(snapshot)
    if store is not None and snapshot.loaded:
        # Only a capture loaded from the files, which is what a restart loads.
        store.keep_bytes(snapshot.revision, STORED_INDEX,
                         _packed_index(index, list(snapshot.concepts), decided_by))
    return index


# The name a revision's index is kept under for the next process on the same files
# (InboundHint.keep_bytes; :func:`_packed_index`). The texts and the three tables are made
# again from the keys, as the build makes them; the postings, most of the build, are read.
STORED_INDEX = "concept-suggestions/1"


def _packed_index(index: SuggestionIndex, concept_ids: list[str], decided_by: str
                  ) -> Iterator[bytes]:
    """The kept value, made by the writing thread: a JSON line (each concept's keys from the
    tables, ``""`` for a key it lacks; the bigrams and their postings' lengths), then every
    posting's numbers as one array's machine bytes. Not as JSON lists: their numbers as
    Python objects were about 25 MB at 9,978 concepts, written or read. ASCII: a path's lone
    surrogate reads back as itself."""
    keys: dict[str, list[str]] = {}
    for n, table in enumerate((index.by_id, index.by_stem, index.by_title)):
        for text, ids in table.items():
            for concept_id in ids:
                keys.setdefault(concept_id, ["", "", ""])[n] = text
    pairs = list(index.postings)
    code = next((numbers.typecode for numbers in index.postings.values()), "H")
    yield json.dumps([decided_by, code, array(code).itemsize, sys.byteorder, concept_ids,
                      [keys.get(concept_id, ["", "", ""]) for concept_id in concept_ids],
                      pairs, [len(index.postings[pair]) for pair in pairs]],
                     separators=(",", ":")).encode("ascii") + b"\n"
    del keys
    for pair in pairs:
        yield index.postings[pair].tobytes()


def _read_index(data: bytes | None, decided_by: str, snapshot: Snapshot
                ) -> SuggestionIndex | None:
    """What :func:`_packed_index` kept, as :func:`build_index` builds it (the same texts in the
    same numbers, the same tables and postings), or ``None`` unless it reads back whole: the
    keys of the snapshot's concepts, postings that number its texts."""
    if data is None:
        return None
    line_end = data.find(b"\n")
    try:
        kept = json.loads(data[:line_end])
    except (UnicodeDecodeError, ValueError):
        return None
    code = _number_code(3 * len(snapshot.concepts))
    if not (line_end >= 0 and isinstance(kept, list) and len(kept) == 8
            and kept[:4] == [decided_by, code, array(code).itemsize, sys.byteorder]):
        return None
    _, _, _, _, kept_ids, keys, pairs, lengths = kept
    concept_ids = list(snapshot.concepts)  # the snapshot's strings, not the JSON's copies
    if kept_ids != concept_ids or not isinstance(keys, list) or len(keys) != len(concept_ids):
        return None
    if not (isinstance(pairs, list) and isinstance(lengths, list) and len(pairs) == len(lengths)
            and all(type(p) is str for p in pairs) and all(type(n) is int for n in lengths)):
        return None
    numbers = array(code)
    body = data[line_end + 1:]
    if len(body) != numbers.itemsize * sum(lengths) or (lengths and min(lengths) <= 0):
        return None
    numbers.frombytes(body)
    by_id: dict[str, list[str]] = {}
    by_stem: dict[str, list[str]] = {}
    by_title: dict[str, list[str]] = {}
    texts: dict[str, int] = {}
    tables = (by_id, by_stem, by_title)
    for concept_id, three in zip(concept_ids, keys, strict=True):
        if not (type(three) is list and len(three) == 3 and all(type(k) is str for k in three)):
            return None
        for table, key in zip(tables, three, strict=True):
            if key:
                table.setdefault(key, []).append(concept_id)
                texts.setdefault(key, len(texts))
    if numbers and max(numbers) >= len(texts):
        return None
    postings: dict[str, array[int]] = {}
    at = 0
    for pair, length in zip(pairs, lengths, strict=True):
        postings[pair] = numbers[at:at + length]
        at += length
    return SuggestionIndex(
        by_id=_frozen(by_id), by_stem=_frozen(by_stem), by_title=_frozen(by_title),
        texts=tuple(texts), postings=types.MappingProxyType(postings),
    )


def suggest(
    snapshot: Snapshot,
    requested: str,
    *,
    project: str | None = None,
    limit: int = MAX_SUGGESTIONS,
    check: Callable[[], None] | None = None,
) -> tuple[Suggestion, ...]:
    """The concepts ``requested`` was probably meant to name, best first (module docstring)."""
    text = concept_id_for_path(requested.strip())
    text = text.removeprefix("./").lstrip("/")
    whole = loose(text)
    last = loose(text.rsplit("/", 1)[-1])
    if not whole:
        return ()
    index = index_of(snapshot, check)
    picked: dict[str, str] = {}  # concept ID -> reason, in the order chosen

    def admissible(concept_id: str) -> bool:
        if concept_id == requested or concept_id in picked:
            return False
        return in_project(snapshot.concepts[concept_id].path, project)

    def take(ids: Iterable[str], reason: str) -> None:
        for concept_id in sorted(set(ids)):
            if len(picked) >= limit:
                return
            if admissible(concept_id):
                picked[concept_id] = reason

    take(index.by_id.get(whole, ()), "case")
    if last:
        take(index.by_stem.get(last, ()), "stem")
    take((*index.by_title.get(whole, ()), *index.by_title.get(last, ())), "title")
    if len(picked) < limit:
        queries = {q for q in (whole, last) if q and len(q) <= MAX_CLOSE_CHARS}
        scores = _close(index, queries, check, admissible, limit - len(picked))
        ranked = sorted(scores.items(), key=lambda item: (-item[1], item[0]))
        for concept_id, _score in ranked:
            if len(picked) >= limit:
                break
            if admissible(concept_id):
                picked[concept_id] = "close"
    out = []
    for concept_id, reason in picked.items():
        doc = snapshot.concepts[concept_id]
        out.append(Suggestion(concept_id, doc.path, concept_name(doc), reason))
    return tuple(out)


def did_you_mean_diagnostics(
    snapshot: Snapshot,
    requested: str,
    field: str,
    *,
    project: str | None = None,
    check: Callable[[], None] | None = None,
) -> tuple[Diagnostic, ...]:
    """One ``did_you_mean`` diagnostic per concept ``requested`` probably meant (``field``: the
    argument that held it): at most five, best first, none when nothing is close."""
    return tuple(
        did_you_mean(s.concept_id, s.name, s.path, field)
        for s in suggest(snapshot, requested, project=project, check=check)
    )


def _sharing(index: SuggestionIndex, pairs: frozenset[str], need: int) -> list[str]:
    """The texts holding at least ``need`` (≥ 1) of ``pairs``, in text-number order.

    Counted in numpy over views of the postings' own memory (``bincount`` of their numbers
    joined): a miss's bigrams reach most texts of a bundle (about 300,000 postings at 10,000
    concepts), and counting them through a ``Counter`` was the largest part of a miss (about
    10 ms of 17)."""
    import numpy  # loaded by the first miss that gets this far, as rapidfuzz is

    found = [numpy.frombuffer(numbers, dtype=numbers.typecode)
             for pair in sorted(pairs) if (numbers := index.postings.get(pair))]
    if not found:
        return []
    counts = numpy.bincount(numpy.concatenate(found), minlength=len(index.texts))
    texts = index.texts
    return [texts[n] for n in numpy.flatnonzero(counts >= need).tolist()]


def _close(
    index: SuggestionIndex,
    queries: set[str],
    check: Callable[[], None] | None,
    admissible: Callable[[str], bool] = lambda concept_id: True,
    wanted: int | None = None,
) -> dict[str, float]:
    """Each ``admissible`` concept with a loose text at least :data:`CLOSE_CUTOFF` similar to a
    query → its best ratio; with ``wanted``, only as many of them as it takes to know the
    ``wanted`` best (by ratio, then ID), which are exactly those of the whole answer.

    Only texts that share at least a third of the query's bigrams are compared (counted through
    the bigram postings, so a miss never walks every text), and of those only the ones whose
    bound allows the cutoff: RapidFuzz's normalised Indel similarity, ``2·LCS / (a + b)``,
    computed in C for all of them in one call. difflib's ratio is ``2·M / (a + b)`` where ``M``
    counts the characters of its matching blocks, a common subsequence, so ``M ≤ LCS``: the
    bound is never below the ratio, and tighter than difflib's ``quick_ratio`` (the characters
    both hold, as counts), which this used before at a Python call a text. The full ratio is
    then computed in the order of those bounds, highest first, and stops where no bound left
    can reach the ``wanted``-th best ratio found (or tie it with an earlier ID).
    """
    # Imported on the first miss that gets this far: a server nobody asks a wrong ID never
    # loads it (about 3.5 MiB, 8 ms).
    from rapidfuzz import fuzz, process

    matchers: dict[str, difflib.SequenceMatcher[str]] = {}
    # (-bound, first carrier, text, query, the admissible concepts carrying the text)
    bounded: list[tuple[float, str, str, str, list[str]]] = []
    for query in sorted(queries):
        if check is not None:
            check()
        pairs = bigrams(query)
        gated = _sharing(index, pairs, math.ceil(len(pairs) / SHARED_BIGRAMS))
        # SequenceMatcher caches what it learns about its second sequence: the query.
        matcher = matchers[query] = difflib.SequenceMatcher(autojunk=False)
        matcher.set_seq2(query)
        for text, score, _ in process.extract_iter(
                query, gated, scorer=fuzz.ratio, processor=None,
                score_cutoff=100 * (CLOSE_CUTOFF - _BOUND_SLACK)):
            carriers = [c for c in index.carriers(text) if admissible(c)]
            if carriers:
                bounded.append((-(score / 100 + _BOUND_SLACK), carriers[0], text, query,
                                carriers))
    bounded.sort()
    best: dict[str, float] = {}
    top: list[tuple[float, str]] = []  # the ``wanted`` best so far: (-ratio, concept ID)
    for seen, (negative, first, text, query, carriers) in enumerate(bounded):
        if check is not None and seen % _CHECK_EVERY == 0:
            check()
        if wanted is not None and len(top) == wanted and (negative, first) > top[-1]:
            break  # sorted: every later text's bound, and first carrier, is no better
        matcher = matchers[query]
        matcher.set_seq1(text)
        ratio = matcher.ratio()
        if ratio < CLOSE_CUTOFF:
            continue
        for concept_id in carriers:
            if ratio > best.get(concept_id, 0.0):
                best[concept_id] = ratio
                if wanted is not None:
                    top = sorted([*(e for e in top if e[1] != concept_id), (-ratio, concept_id)]
                                 )[:wanted]
    return best
