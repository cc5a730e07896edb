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

The index of loose texts and their bigrams is built once per snapshot, on the first miss
(:data:`CONCEPT_SUGGESTIONS`); a request longer than :data:`MAX_CLOSE_CHARS`
gets the exact tiers only.
"""

from __future__ import annotations

import difflib
import math
import re
import types
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from itertools import chain

from ..derived import Slot, of_snapshot
from ..errors import Diagnostic, did_you_mean
from ..model import Snapshot
from .folding import fold
from .graph import in_project
from .ids import concept_id_for_path
from .names import concept_name
from .properties import text_field

__all__ = [
    "CLOSE_CUTOFF",
    "CONCEPT_SUGGESTIONS",
    "SLOTS",
    "MAX_SUGGESTIONS",
    "Suggestion",
    "SuggestionIndex",
    "did_you_mean_diagnostics",
    "loose",
    "suggest",
]

CONCEPT_SUGGESTIONS: Slot[SuggestionIndex] = Slot(
    "concept_suggestions", "snapshot",
    "loose IDs, stems and titles of every concept, for 'did you mean' on concept_not_found "
    "(SuggestionIndex); built on the first miss",
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
    # Every loose ID, stem and title once (sorted), the IDs carrying each, and which texts hold
    # each character bigram (:func:`bigrams`), for close matches.
    texts: tuple[str, ...]
    carriers: tuple[tuple[str, ...], ...]
    postings: Mapping[str, tuple[int, ...]]


def bigrams(text: str) -> frozenset[str]:
    """The character pairs of ``text`` padded with a space at each end (so that a one-letter
    text has two, and first and last letters count)."""
    padded = f" {text} "
    return frozenset(padded[i : i + 2] for i in range(len(padded) - 1))


def build_index(snapshot: Snapshot) -> SuggestionIndex:
    by_id: dict[str, list[str]] = {}
    by_stem: dict[str, list[str]] = {}
    by_title: dict[str, list[str]] = {}
    every: dict[str, set[str]] = {}
    for concept_id, doc in snapshot.concepts.items():  # sorted by ID, so each list is too
        keys = [
            (by_id, loose(concept_id)),
            (by_stem, loose(concept_id.rsplit("/", 1)[-1])),
            (by_title, loose(text_field(doc.fm, "title"))),
        ]
        for table, key in keys:
            if key:
                table.setdefault(key, []).append(concept_id)
                every.setdefault(key, set()).add(concept_id)
    texts = tuple(sorted(every))
    postings: dict[str, list[int]] = {}
    for position, text in enumerate(texts):
        for pair in bigrams(text):
            postings.setdefault(pair, []).append(position)
    return SuggestionIndex(
        by_id=_frozen(by_id),
        by_stem=_frozen(by_stem),
        by_title=_frozen(by_title),
        texts=texts,
        carriers=tuple(tuple(sorted(every[text])) for text in texts),
        postings=types.MappingProxyType({k: tuple(v) for k, v in postings.items()}),
    )


def _frozen(table: dict[str, list[str]]) -> Mapping[str, tuple[str, ...]]:
    return types.MappingProxyType({k: tuple(v) for k, v in table.items()})


def index_of(snapshot: Snapshot, check: Callable[[], None] | None = None) -> SuggestionIndex:
    """The snapshot's suggestion index, built on first use and kept with the snapshot."""
    index: SuggestionIndex = of_snapshot(
        snapshot, CONCEPT_SUGGESTIONS, lambda: build_index(snapshot), check=check
    )
    return index


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
        scores = _close(index, queries, check)
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


def _close(
    index: SuggestionIndex, queries: set[str], check: Callable[[], None] | None
) -> dict[str, float]:
    """Each concept with a loose text at least :data:`CLOSE_CUTOFF` similar to a query → its
    best ratio.

    Only texts that share at least a third of the query's bigrams are compared (counted through
    the bigram postings, so a miss never walks every text), and of those only the ones whose
    length allows the cutoff at all: a ratio is at most ``2·min(a, b) / (a + b)``.
    """
    best: dict[str, float] = {}
    matcher = difflib.SequenceMatcher(autojunk=False)
    for query in sorted(queries):
        pairs = bigrams(query)
        shared = Counter(chain.from_iterable(index.postings.get(p, ()) for p in sorted(pairs)))
        need = math.ceil(len(pairs) / SHARED_BIGRAMS)
        size = len(query)
        shortest = CLOSE_CUTOFF * size / (2 - CLOSE_CUTOFF)
        longest = size * (2 - CLOSE_CUTOFF) / CLOSE_CUTOFF
        # SequenceMatcher caches what it learns about its second sequence: the query.
        matcher.set_seq2(query)
        for seen, position in enumerate(sorted(p for p, n in shared.items() if n >= need)):
            if check is not None and seen % _CHECK_EVERY == 0:
                check()
            text = index.texts[position]
            if not shortest <= len(text) <= longest:
                continue
            matcher.set_seq1(text)
            if matcher.quick_ratio() < CLOSE_CUTOFF:
                continue
            ratio = matcher.ratio()
            if ratio < CLOSE_CUTOFF:
                continue
            for concept_id in index.carriers[position]:
                if ratio > best.get(concept_id, 0.0):
                    best[concept_id] = ratio
    return best
