"""context's scores are sums of each stem's kept part (``TermScores``), and a warm question reads
the words of its candidates only.

The reference below scores every concept the plain way, reading its words whole (what
``score`` did before the parts were kept): the kept parts must give exactly the same floats,
since the pack's order and scores depend on every bit. The work counters pin that a question
does not go back to reading every matching document. Every bundle is written by the test.
"""

from __future__ import annotations

import threading
from array import array
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from bundle_mcp.cancel import CancelToken
from bundle_mcp.dispatch import Dispatcher, ServeConfig
from bundle_mcp.model import Snapshot
from bundle_mcp.tools import _context_index as index
from bundle_mcp.tools import _context_words, context
from bundle_mcp.tools._context_index import (
    FIELD_B,
    FIELD_WEIGHT,
    FIELDS,
    HEADING_WEIGHT,
    JUNK_DISCOUNT,
    K1,
    LABEL_B,
    SECTION_B,
    SECTION_K1,
    TermScores,
    document_words,
    score,
    stem,
    totals,
)
from bundle_mcp.tools._stem_codes import StemCodes, count, finds, pair

if TYPE_CHECKING:  # fixtures' types only; pytest provides the objects
    from conftest import BundleFactory

Reference = dict[str, tuple[float, float, dict[int, float]]]


def _idf(n: int, df: int) -> float:
    import math

    return math.log(1 + (n - df + 0.5) / (df + 0.5))


def reference(snapshot: Snapshot, terms: list[str], admitted: set[str] | None = None
              ) -> Reference:
    """Each concept holding a stem: (BM25F, title-and-description BM25, section → BM25),
    computed by reading every concept's words whole, stem by stem."""
    token = CancelToken()
    stats = totals(snapshot, token)
    words = {cid: document_words(doc) for cid, doc in snapshot.concepts.items()}
    label_avg = stats.field_avg[0] + stats.field_avg[1]
    concept: dict[str, float] = {}
    label: dict[str, float] = {}
    sections: dict[str, dict[int, float]] = {}
    for term in terms:
        found = []
        for cid, w in words.items():
            fields = (w.title, w.description, w.headings, w.body)
            counts = tuple(w.stems(f).count(term) for f in fields)
            per = {k: w.stems(w.body[s.start:s.end]).count(term)
                   for k, s in enumerate(w.sections)}
            if any(counts) or any(term in w.stems(s.heading_words) for s in w.sections):
                found.append((cid, w, counts, {k: c for k, c in per.items() if c}))
        doc_idf = _idf(stats.concepts, len(found))
        section_idf = _idf(stats.sections, sum(len(per) for *_, per in found))
        for cid, w, counts, per in found:
            if admitted is not None and cid not in admitted:
                continue
            pseudo = 0.0
            for n, tf in enumerate(counts):
                if tf:
                    field = FIELDS[n]
                    norm = 1 - FIELD_B[field] + FIELD_B[field] * (
                        w.lengths[n] / stats.field_avg[n])
                    pseudo += FIELD_WEIGHT[field] * tf / norm
            concept[cid] = concept.get(cid, 0.0) + doc_idf * pseudo / (K1 + pseudo)
            label_tf = counts[0] + counts[1]
            if label_tf:
                norm = K1 * (1 - LABEL_B + LABEL_B * (w.lengths[0] + w.lengths[1]) / label_avg)
                label[cid] = (label.get(cid, 0.0)
                              + doc_idf * label_tf * (K1 + 1) / (label_tf + norm))
            mine = sections.setdefault(cid, {})
            for k, raw in per.items():
                s = w.sections[k]
                if s.length <= s.heading_length:
                    continue
                tf = raw + (HEADING_WEIGHT - 1) * w.stems(s.heading_words).count(term)
                norm = SECTION_K1 * (1 - SECTION_B + SECTION_B * s.length / stats.section_avg)
                mine[k] = mine.get(k, 0.0) + (section_idf * tf * (SECTION_K1 + 1) / (tf + norm)
                                              * (1.0 - JUNK_DISCOUNT * s.junk))
    return {cid: (value, label.get(cid, 0.0), sections[cid]) for cid, value in concept.items()}


def kept(snapshot: Snapshot, terms: list[str], admitted: set[str] | None = None) -> Reference:
    found = score(snapshot, terms, CancelToken(), admitted)
    return {found.concept_id(p): (found.concept[p], found.label[p], found.sections_of(p))
            for p in range(len(found.concept)) if found.concept[p]}  # holding a stem


def varied_files(pages: int = 40) -> dict[str, str]:
    """Pages whose words fall in every field: titles, descriptions, headings with and without
    text below, link lists, tables, code, a non-ASCII body, repeats within a section."""
    words = ["cache", "caching", "download", "prune", "install", "folder", "mirror", "binary"]
    files = {}
    for n in range(pages):
        a, b, c = words[n % 8], words[(3 * n + 1) % 8], words[(5 * n + 2) % 8]
        description = f"description: How to {a} the {b}\n" if n % 3 else ""
        body = [f"# Page {n} {a}", "", f"The {a} and the {b} keep the {a} {c}.", ""]
        body += [f"## {b.title()} {c}", "", f"{c} {c} {a}, then {b}." * (1 + n % 4), ""]
        if n % 4 == 0:
            body += [f"## {a.title()}", ""]  # a heading with nothing under it
        if n % 5 == 0:
            body += ["## Links", "", f"- [{a}](other.md)", f"- [{b}](https://x.example/{c})",
                     ""]
        if n % 6 == 0:
            body += ["## Table", "", f"| {a} | {b} |", "|---|---|", f"| {c} | {a} |", ""]
        if n % 7 == 0:
            body += ["## Code", "", "```", f"{a} --{b}", "```", "", f"Ünïcode {b} café {c}."]
        files[f"f{n % 4}/p{n}.md"] = (
            f"---\ntype: Guide\ntitle: {a.title()} {n}\n{description}---\n" + "\n".join(body)
            + "\n")
    return files


@pytest.fixture()
def served(tmp_bundle: BundleFactory) -> tuple[Dispatcher, Snapshot]:
    root = tmp_bundle(varied_files())
    dispatcher = Dispatcher(ServeConfig(bundles=(root,)))
    return dispatcher, dispatcher.served_snapshot(root, CancelToken())


@pytest.mark.parametrize("question", [
    "cache", "prune the download cache", "binary mirror folder", "caching install page",
    "café", "nothing here at all",
])
def test_summed_parts_score_as_each_concept_read_whole(
    served: tuple[Dispatcher, Snapshot], question: str
) -> None:
    _, snapshot = served
    terms = list(dict.fromkeys(stem(w) for w in question.split()))
    assert kept(snapshot, terms) == reference(snapshot, terms)  # floats equal to the bit
    admitted = {cid for n, cid in enumerate(snapshot.concepts) if n % 3}
    assert kept(snapshot, terms, admitted) == reference(snapshot, terms, admitted)


def test_a_stem_part_is_built_once_and_kept_compact(
    served: tuple[Dispatcher, Snapshot], monkeypatch: pytest.MonkeyPatch
) -> None:
    dispatcher, snapshot = served
    built: list[str] = []
    build = index._term_scores

    def counted(snapshot: Snapshot, term: str, token: CancelToken) -> TermScores:
        built.append(term)
        return build(snapshot, term, token)

    monkeypatch.setattr(index, "_term_scores", counted)
    dispatcher.call("context", {"question": "prune the download cache"})
    assert sorted(built) == sorted([stem("prune"), stem("download"), stem("cache")])
    dispatcher.call("context", {"question": "download cache, prune"})  # the same stems
    dispatcher.call("context", {"question": "caching the mirror"})  # one new stem
    assert sorted(built) == sorted([stem("prune"), stem("download"), stem("cache"),
                                    stem("mirror")])
    part = index.term_scores(snapshot, stem("cache"), CancelToken())
    arrays: list[Any] = [part.positions, part.concept, part.label_positions, part.label,
                         part.sections, part.section, part.described, part.headed]
    assert all(isinstance(a, array) for a in arrays)
    assert len(part.positions) == len(part.concept) == part.holders > 0
    assert len(part.sections) == len(part.section) > 0


def test_a_warm_question_reads_the_words_of_its_candidates_only(
    tmp_bundle: BundleFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 300 pages hold both words in their text (not in a heading or a description, whose
    # matches are read per page): a warm question reads the words of the concepts it packs
    # and ranks (at most MAX_CANDIDATE_CONCEPTS for phrases, as many for sections), never of
    # every page that matched, as the scoring did when it read each concept's words. Pages
    # are counted once however often their (kept) words are asked for.
    pages = 300
    root = tmp_bundle({
        f"p{n}.md": f"---\ntype: Guide\ntitle: Page {n}\n---\n# Page {n}\n\n"
                    f"The download cache holds {n} archives.\n"
        for n in range(pages)
    })
    dispatcher = Dispatcher(ServeConfig(bundles=(root,)))
    question = {"question": "download cache"}
    assert not dispatcher.call("context", question).is_error  # builds every part
    reads: list[str] = []
    real = index.concept_words

    def counted(snapshot: Any, concept_id: str) -> Any:
        reads.append(concept_id)
        return real(snapshot, concept_id)

    monkeypatch.setattr(index, "concept_words", counted)
    monkeypatch.setattr(context, "concept_words", counted)
    outcome = dispatcher.call("context", question)
    assert not outcome.is_error
    assert outcome.structured["total"] > 0
    assert len(set(reads)) <= 2 * context.MAX_CANDIDATE_CONCEPTS < pages


LIMIT = 40


def _without_parse_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    """For a test that numbers stems with a table of its own: a save runs a second later in a
    thread, and would encode one server's documents with the other table (the test's, or the
    process's once it is put back). The saves earlier tests' servers set off are let finish
    first, for the same reason."""
    monkeypatch.setenv("BUNDLE_MCP_CACHE_DIR", "off")
    for thread in threading.enumerate():
        if thread.name == "bundle-mcp-parse-cache":
            thread.join(timeout=60)


def _answered(root: str, question: str) -> tuple[Any, Snapshot]:
    """A new server's answer to ``question`` on ``root``, and the snapshot it served."""
    dispatcher = Dispatcher(ServeConfig(bundles=(root,)))
    outcome = dispatcher.call("context", {"question": question})
    assert not outcome.is_error, outcome.structured
    return outcome.structured, dispatcher.served_snapshot(root, CancelToken())


@pytest.mark.parametrize("question", [
    "prune the download cache", "binary mirror folder", "caching install page", "café",
])
def test_wide_documents_score_and_answer_as_narrow_ones(
    tmp_bundle: BundleFactory, monkeypatch: pytest.MonkeyPatch, question: str
) -> None:
    # Past a million distinct stems a document's words take two characters each; a table
    # with room for LIMIT single characters makes the first pages narrow and the rest wide.
    root = tmp_bundle(varied_files())
    _without_parse_cache(monkeypatch)
    narrow, _ = _answered(root, question)
    monkeypatch.setattr(_context_words, "CODES", StemCodes(single_limit=LIMIT))
    wide, snapshot = _answered(root, question)
    assert wide == narrow
    widths = [document_words(doc).width for doc in snapshot.concepts.values()]
    assert 1 in widths and 2 in widths
    terms = list(dict.fromkeys(stem(w) for w in question.split()))
    assert kept(snapshot, terms) == reference(snapshot, terms)


def test_a_wide_find_counts_at_a_words_start_only() -> None:
    # The codes of 1 and 0xD800 + 2 are "\x00\x01" and "\x01\x02": side by side, the
    # first's second character and the second's first spell "\x01\x01", the code of
    # 0xD800 + 1, which is not in the text as a word.
    first, second = pair(1), pair(0xD800 + 2)
    straddling = pair(0xD800 + 1)
    text = first + second + first
    assert straddling in text  # as characters, across two words
    assert list(finds(text, straddling, 2)) == []
    assert count(text, straddling, 2) == 0
    assert list(finds(text, first, 2)) == [0, 4]
    assert count(text, second, 2) == 1


def _asked(root: str, question: str, monkeypatch: pytest.MonkeyPatch
           ) -> tuple[Snapshot, list[str], index.Scores, dict[str, float]]:
    """``root`` served, and ``question``'s stems, scores and idfs there. The stems are
    numbered in a table of the test's own: past 0xF800 stems numbered by earlier tests in
    this process, the columns would hold none of this bundle's, and the labels none."""
    _without_parse_cache(monkeypatch)
    monkeypatch.setattr(_context_words, "CODES", StemCodes())
    snapshot = Dispatcher(ServeConfig(bundles=(root,))).served_snapshot(root, CancelToken())
    token = CancelToken()
    terms = context.content_terms(list(dict.fromkeys(question.split())))
    stems = list(dict.fromkeys(stem(t) for t in terms))
    return (snapshot, stems, score(snapshot, stems, token),
            index.idfs(snapshot, stems, token))


@pytest.mark.parametrize("question", [
    "cache", "prune the download cache", "binary mirror folder", "how to cache the binary",
    "links table code", "nothing here at all",
])
def test_the_ranking_shortcuts_choose_as_the_plain_ways_do(
    tmp_bundle: BundleFactory, monkeypatch: pytest.MonkeyPatch, question: str
) -> None:
    # context reads the dense scores through shortcuts, each argued exact in its docstring:
    # a heading's or description's match compared as codes (read from the columns or from the
    # concept's words: the same characters), the best concepts taken from the
    # dense array, the best sections looked for only in the concepts whose best section is
    # among the best. Each must give what the plain way gives, to the bit, on a bundle with
    # more concepts and sections than either list keeps.
    snapshot, stems, scores, idf = _asked(tmp_bundle(varied_files(pages=240)), question,
                                          monkeypatch)
    matcher = context._Matcher(stems, idf)
    labels = index.label_codes(snapshot, CancelToken())
    assert labels is not None
    compared = 0
    for g in scores.headed:
        position, n = scores.index.place(g)
        words = scores.words(position)
        heading = words.sections.heading_words(n)
        assert matcher.match(words, heading, words.title) == context._match(
            words.field_stems(heading), stems, idf, words.field_stems(words.title))
        # The columns' codes are the words' own.
        assert (labels.heading(g), labels.title(position)) == (heading, words.title)
        compared += 1
    for position in scores.described:
        words = scores.words(position)
        assert matcher.match(words, words.description) == context._match(
            words.field_stems(words.description), stems, idf)
        assert labels.description(position) == words.description
        compared += 1
    every = frozenset(snapshot.concepts)
    raised, matches = context._with_label_matches(scores, stems, idf, labels, every)
    from_words = context._with_label_matches(scores, stems, idf, None, every)
    assert (raised, matches) == from_words
    best = raised.best_section()
    positive = {p: v for p, v in enumerate(best) if v}
    assert context._best_positions(best, 10, lambda p: (-best[p], p)) == context._best(
        positive, 10, lambda p: (-best[p], p))
    strong = context._with_strong_sections(raised, best, [])
    section = raised.section

    def rank(g: int) -> tuple[float, str, int]:
        position, n = raised.index.place(g)
        return -section[g], raised.concept_id(position), n

    plain = context._best({g: v for g, v in enumerate(section) if v},
                          context.MAX_STRONG_SECTIONS, rank)
    assert [(c.concept_id, c.line_start, c.score) for c in strong] == [
        (raised.concept_id(raised.index.place(g)[0]),
         raised.words(raised.index.place(g)[0]).sections[raised.index.place(g)[1]].line_start,
         context.SECTION_ALONE * section[g]) for g in plain]
    if stems and question != "nothing here at all":
        assert compared and len(plain) == context.MAX_STRONG_SECTIONS


@pytest.mark.parametrize("question", [
    "how to do it", "cache", "how to cache the binary", "prune it all", "mirror mirror",
    "nothing here at all",
])
def test_label_matches_from_counts_are_the_matches_of_their_codes(
    tmp_bundle: BundleFactory, monkeypatch: pytest.MonkeyPatch, question: str
) -> None:
    # Issue 29: context weighs every description holding a question stem; reading each one's
    # codes into a set was most of that at 50,000 concepts, so the match is made from counts
    # (which stems a description holds, how many distinct codes and non-stop codes it has).
    # The floats must be the codes' own to the bit, stop words and repeats included: a
    # description of stop words alone takes every code as its content.
    files = varied_files(pages=60)
    descriptions = ["How to do it", "It is all of it", "Cache the cache, then the binary",
                    "Mirror mirror mirror", "Prune the download folder before it is all gone"]
    for n, text in enumerate(descriptions * 4):
        # Headings of stop words alone, of the title's words, of the description's.
        files[f"extra/q{n}.md"] = (
            f"---\ntype: Guide\ntitle: Extra {n} cache\ndescription: {text}\n---\n"
            f"# Extra {n}\n\nBody {n}.\n\n## How to do it\n\nIt is so.\n\n"
            f"## Extra cache\n\nThe cache.\n\n## {text}\n\nMore {n}.\n")
    snapshot, stems, scores, idf = _asked(tmp_bundle(files), question, monkeypatch)
    matcher = context._Matcher(stems, idf)
    labels = index.label_codes(snapshot, CancelToken())
    assert labels is not None and not labels.description_marked
    positions = sorted(scores.described)
    counted = matcher.description_matches(positions, scores.described_by, labels)
    by_codes = {p: matcher.match_codes(labels.description(p) or "") for p in positions}
    assert counted == by_codes
    for p in positions:  # the same bits, not merely equal after rounding
        assert counted[p].hex() == by_codes[p].hex()
    if question == "how to do it":
        stop_only = [p for p in positions if labels.description_content[p] == 0]
        assert stop_only and all(counted[p] > 0.0 for p in stop_only)
    if question != "nothing here at all":
        assert positions and any(counted.values())
    # Headings, each read under its page's title.
    sections = sorted(scores.headed)
    assert not labels.heading_marked
    by_heading = matcher.heading_matches(sections, scores.headed_by, labels)
    plain = {g: matcher.match_codes(labels.heading(g) or "",
                                    labels.title(scores.index.place(g)[0]) or "")
             for g in sections}
    assert {g: v.hex() for g, v in by_heading.items()} == {g: v.hex() for g, v in plain.items()}
    if question in ("how to do it", "how to cache the binary"):
        assert sections and any(by_heading.values())
        # Some heading's content is taken by its title, or is stop words alone.
        assert any(labels.heading_free[g] < labels.heading_content[g]
                   or labels.heading_content[g] == 0 for g in sections)


@pytest.mark.parametrize("values", [[], [3], [0, 0], [1, 2, 2, 2, 7, 9, 9], list(range(40))])
def test_runs_of_an_ordered_array_are_numpys_unique_with_counts(values: list[int]) -> None:
    # A stem's finds are in order, so their sections never decrease: their runs are what
    # numpy.unique would give, values, counts and types alike, without its sort.
    import numpy

    for dtype in (numpy.intp, numpy.int32):
        ordered = numpy.array(values, dtype=dtype)
        found, counts = index._runs(ordered)
        expected, expected_counts = numpy.unique(ordered, return_counts=True)
        assert found.dtype == expected.dtype and counts.dtype == expected_counts.dtype
        assert found.tolist() == expected.tolist()
        assert counts.tolist() == expected_counts.tolist()


@pytest.mark.parametrize(("values", "count"), [
    ([], 3), ([0.0, 0.0], 2), ([0.5, 0.0, 2.0], 5), ([1.0, 3.0, 3.0, 2.0, 3.0], 2),
    ([0.25, 0.75, 0.0, 0.75, 0.5, 0.75], 1), ([2.0, 1.0], 2),
])
def test_the_positions_at_least_the_countth_highest_are_the_heaps(
    values: list[float], count: int
) -> None:
    # Taken in numpy (a partition) from the dense scores; the plain way is a heap's count-th
    # highest, then every position holding at least it (every positive one when it is 0.0).
    import heapq

    import numpy

    cut = heapq.nlargest(count, values)[-1] if values else 0.0
    plain = [p for p, v in enumerate(values) if (v >= cut if cut > 0.0 else v)]
    assert context._positive_at_least(values, count) == plain
    assert context._positive_at_least(numpy.array(values, dtype=float), count) == plain


def _scores_over(first_section: list[int], section: list[float]) -> index.Scores:
    layout = index._Holders(None, None, array("i", first_section),  # type: ignore[arg-type]
                            array("i"))
    return index.Scores(array("d"), array("d"), array("d", section), frozenset(), frozenset(),
                        layout)


@pytest.mark.parametrize(("first_section", "section"), [
    # An empty run's start holds its neighbour's first score, which it must not take.
    ([0, 2, 2, 5], [0.5, 1.25, 0.75, 3.0, 0.1]),  # a concept with no section between two
    ([0, 0, 3, 3], [0.4, 0.0, 2.5]),  # the first and the last concept without one
    ([0, 1], [0.0]),  # one concept, one section that scores nothing
    ([0], []),  # no concept
    ([0, 0, 0], []),  # concepts, no section at all
])
def test_each_concepts_best_section_is_the_maximum_of_its_run(
        first_section: list[int], section: list[float]) -> None:
    plain = [max(section[a:b], default=0.0)
             for a, b in zip(first_section, first_section[1:], strict=False)]
    assert _scores_over(first_section, section).best_section().tolist() == plain


def test_a_part_is_added_one_addition_a_key_and_refused_unaligned() -> None:
    total = array("d", [0.1, 0.0, 0.3, 0.0])
    index._added(total, array("i", [0, 2, 3]), array("d", [0.2, 0.7, 1e-17]))
    assert list(total) == [0.1 + 0.2, 0.0, 0.3 + 0.7, 0.0 + 1e-17]
    index._added(total, array("i"), array("d"))  # an empty part changes nothing
    assert list(total) == [0.1 + 0.2, 0.0, 0.3 + 0.7, 1e-17]
    with pytest.raises(ValueError, match="not aligned"):
        index._added(total, array("i", [1]), array("d"))


def _every_stem_part_agrees(snapshot: Snapshot, step: int = 1) -> int:
    """Every ``step``-th stem's part from the columns equals the loop's, array for array and
    float for float; how many stems were compared."""
    token = CancelToken()
    found = index.columns(snapshot, token)
    assert found is not None
    compared = 0
    for term in list(index.stem_holders(snapshot, token))[::step]:
        code = _context_words.narrow_code(term)
        assert code is not None
        looped = index._looped_term_scores(snapshot, term, token)
        assert index._column_term_scores(snapshot, term, token, found, code) == looped, term
        compared += 1
    return compared


def test_a_stem_part_from_the_columns_is_the_loops_part(
    served: tuple[Dispatcher, Snapshot]
) -> None:
    # Every stem of pages with words in each field, headings with nothing below, link lists,
    # tables, code and accented words: rare stems (one holder) and common ones alike.
    _, snapshot = served
    assert _every_stem_part_agrees(snapshot) > 20


@pytest.mark.slow
def test_a_stem_part_from_the_columns_is_the_loops_part_on_a_real_corpus() -> None:
    root = Path(__file__).resolve().parents[2] / "shared" / "corpora" / "pnpm-docs"
    if not root.is_dir():
        pytest.skip(f"the shared corpus is not at {root} (../shared beside the checkout)")
    # Translations (CJK, Hangul, Cyrillic), tables of flags, code, real headings.
    dispatcher = Dispatcher(ServeConfig(bundles=(str(root),)))
    snapshot = dispatcher.served_snapshot(str(root), CancelToken())
    assert _every_stem_part_agrees(snapshot, step=13) > 250


def test_a_common_stem_is_scored_from_the_columns_and_a_rare_one_holder_by_holder(
    served: tuple[Dispatcher, Snapshot], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, snapshot = served
    routes: list[tuple[str, str]] = []
    for name in ("_column_term_scores", "_looped_term_scores"):
        real = getattr(index, name)

        def spied(*args: Any, _real: Any = real, _name: str = name) -> Any:
            routes.append((_name, args[1]))
            return _real(*args)

        monkeypatch.setattr(index, name, spied)
    holders = index.stem_holders(snapshot, CancelToken())
    rare = next(t for t in holders if len(holders[t]) == 1)
    common = stem("cache")
    assert len(holders[common]) * index.COLUMNS_FROM_SHARE >= len(snapshot.concepts)
    assert len(holders[rare]) * index.COLUMNS_FROM_SHARE < len(snapshot.concepts)
    terms = [common, rare]
    assert kept(snapshot, terms) == reference(snapshot, terms)
    assert routes == [("_column_term_scores", common), ("_looped_term_scores", rare)]


def test_finds_outside_the_stems_holders_leave_the_part_to_the_loop(
    served: tuple[Dispatcher, Snapshot]
) -> None:
    # The holders are made from the same words, so this never happens; if it did, the
    # columns' part would name concepts the holders do not, and is refused.
    _, snapshot = served
    token = CancelToken()
    found = index.columns(snapshot, token)
    assert found is not None
    term = stem("cache")
    held = index.stem_holders(snapshot, token)[term]
    fewer = {term: held[1:]}
    real = index.stem_holders
    try:
        index.stem_holders = lambda *_: fewer  # type: ignore[assignment]
        code = _context_words.narrow_code(term)
        assert code is not None
        assert index._column_term_scores(snapshot, term, token, found, code) is None
    finally:
        index.stem_holders = real  # type: ignore[assignment]


@pytest.mark.parametrize("question", ["prune the download cache", "café mirror binary"])
def test_codes_past_the_basic_plane_are_looped_and_the_others_placed_by_character(
    tmp_bundle: BundleFactory, monkeypatch: pytest.MonkeyPatch, question: str
) -> None:
    # A stem numbered from 0xF800 has a code past U+FFFF. A table that numbers the bundle's
    # first stems below that and the rest past it makes pages hold both: the columns keep a
    # unit a character (a code past the plane as a surrogate), a stem whose code is past it
    # is looped, and the answer is the one a table of low numbers gives.
    root = tmp_bundle(varied_files())
    _without_parse_cache(monkeypatch)
    low, _ = _answered(root, question)
    codes = StemCodes()
    codes.numbers(f"padding{n}" for n in range(0xF800 - 12))
    monkeypatch.setattr(_context_words, "CODES", codes)
    high, snapshot = _answered(root, question)
    assert high == low
    token = CancelToken()
    found = index.columns(snapshot, token)
    assert found is not None and (found.body == index._PAST_PLANE).any()
    paired = compared = 0
    for term in index.stem_holders(snapshot, token):
        code = _context_words.narrow_code(term)
        assert code is not None
        part = index._column_term_scores(snapshot, term, token, found, code)
        if ord(code) >= 0x10000:
            assert part is None
            paired += 1
        else:
            assert part == index._looped_term_scores(snapshot, term, token), term
            compared += 1
    assert paired > 0 and compared > 0
    terms = list(dict.fromkeys(stem(w) for w in question.split()))
    assert kept(snapshot, terms) == reference(snapshot, terms)
