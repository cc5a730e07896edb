"""search_concepts' body word index (``tools/_body_words.py``) narrows the bodies a query checks;
the exact ``in`` check stays the arbiter, so with the index every answer is the plain scan's:
for needles cut anywhere from real bodies (across words, mid-word, one or two characters,
punctuation and spaces alone, non-ASCII folds such as 'ß' → 'ss' and 'İ' → 'i̇'), after the
index is updated from a predecessor's, and for every golden case."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bundle_mcp.cancel import CancelToken
from bundle_mcp.derived import kept
from bundle_mcp.loader import assemble_snapshot, deferred
from bundle_mcp.model import Snapshot
from bundle_mcp.okf.folding import fold
from bundle_mcp.tools import _body_words as bw
from bundle_mcp.tools import _section_index as si
from bundle_mcp.tools import search_concepts as sc

try:
    from tests import golden_runner
except ImportError:  # pytest run without the repository root on sys.path
    import golden_runner  # type: ignore[no-redef]

BODIES = {
    "a/alpha": "Beans from Ethiopia; the roast is light. See https://example.com/a_b?x=1.",
    "a/beta": "Nothing about alpha here, only beta-blockers and C++ (or C#).",
    "a/gamma": "Straße und Café: die STRASSE, ǅungla ﬁle, Kelvin sign K, 10 °C.",
    "b/delta": "Greek σίγμα and final ς, ΣΊΓΜΑ; İstanbul and ıstanbul; 東京都 の 天気; x\u0301y.",
    "b/epsilon": "snake_case_name, CamelCaseName, e-mail, e.g. x86_64 and 3.14159.",
    "b/zeta": "zq09977 is rare; zq0997 is rarer; zq09977zq is neither.",
    "c/eta": "   leading spaces, trailing --- and a\ttab\nnew line ...",
    "c/theta": "",
    "c/iota": "roast roast roast. Roasting: roasted; ROAST!",
    "d/kappa": "An ASCII body under a title that is not: Roast, Zeta, x86_64.",
}
# Non-ASCII frontmatter over an ASCII body: the body's fold is cut out, not the text's.
TITLES = {"d/kappa": "Röstung"}
RAW = "".join(BODIES.values())


def concept(body: str, title: str = "T") -> str:
    return f"---\ntype: Note\ntitle: {title}\n---\n{body}\n"


def _cells(files: dict[str, str]) -> dict[str, Any]:
    return {path: deferred(path, text.encode("utf-8")) for path, text in sorted(files.items())}


def _assembled(cells: dict[str, Any], predecessor: Snapshot | None = None) -> Snapshot:
    folders = {""} | {p.rsplit("/", 1)[0] for p in cells if "/" in p}
    return assemble_snapshot(cells, frozenset(), frozenset(folders), (), predecessor=predecessor)


@pytest.fixture(scope="module")
def snapshot() -> Snapshot:
    return _assembled(_cells({f"{cid}.md": concept(body, TITLES.get(cid, "T"))
                              for cid, body in BODIES.items()}))


def _agree(snapshot: Snapshot, index: bw.BodyWordIndex, needle: str) -> None:
    """The index's candidates hold every body with the needle, and the narrowed priorities
    are the scan's; the scan (however much of it searches the texts as written first) and
    each document's own check find exactly the bodies whose fold holds the needle."""
    token = CancelToken()
    columns = sc._fields(snapshot, token)
    candidates = index.candidates(needle)
    holding = {cid for cid, doc in snapshot.concepts.items() if needle in fold(doc.body)}
    assert {cid for cid, doc in snapshot.concepts.items()
            if doc.folded_body_holds(needle)} == holding
    if candidates is not None:
        assert holding <= candidates, (needle, holding - candidates)
    for every in (False, True):
        wider = index.candidates(needle, every=every)
        assert wider is None or holding <= wider
    for sampled in (1, 3, sc._SAMPLED_TEXTS):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(sc, "_SAMPLED_TEXTS", sampled)
            scanned = {columns.concept_ids[n] for n in columns._scanned(needle, token)}
        assert scanned == holding, (needle, sampled)
    scan = columns.priorities(needle, token)
    assert columns.priorities(needle, token, candidates) == scan
    holders = index.holders(needle)
    if holders is not None:  # one run of word characters: the index alone answers
        assert holders == holding, needle
        assert columns.priorities(needle, token, holders, holders=True) == scan


def test_bodies_are_not_kept_folded_unless_not_ascii(snapshot: Snapshot) -> None:
    """Only a non-ASCII body's fold is kept with the document: an ASCII one is folded when a
    call needs it, and the search's columns hold the documents' own texts."""
    columns = sc._fields(snapshot, CancelToken())
    kinds = columns.body_kinds(CancelToken())
    for cid, doc in snapshot.concepts.items():
        kept_body = doc.folded.kept_body
        assert (kept_body is None) == doc.body.isascii(), cid
        assert doc.folded_body() == fold(doc.body)
    ascii_ids = {columns.concept_ids[n] for n in kinds.ascii_positions}
    assert ascii_ids == {cid for cid, doc in snapshot.concepts.items() if doc.text.isascii()}
    assert all(held is snapshot.concepts[columns.concept_ids[n]].held
               for n, held in zip(kinds.ascii_positions, kinds.ascii_texts, strict=True))
    assert {columns.concept_ids[n] for n in kinds.other_positions} == {"d/kappa"}
    assert {columns.concept_ids[n] for n in kinds.kept_positions} == {"a/gamma", "b/delta"}


def _cut(text: str) -> st.SearchStrategy[str]:
    return st.tuples(st.integers(0, len(text) - 1), st.integers(1, 24)).map(
        lambda at: text[at[0]:at[0] + at[1]])


FOLDED = fold(RAW)
NEEDLES = st.one_of(
    _cut(FOLDED),  # across words, mid-word, punctuation: whatever the cut gives
    _cut(RAW).map(fold),  # a query typed in any case, folded as search_concepts folds it
    _cut(FOLDED).filter(lambda s: len(s) <= 2),
    st.text(alphabet=" .,-_;:!?()#+ßİıσςΣkK0123456789aeiourstnxzq", min_size=1, max_size=6)
    .map(fold),
)


@settings(max_examples=400, deadline=None)
@given(needle=NEEDLES)
def test_the_narrowed_search_is_the_scan(snapshot: Snapshot, needle: str) -> None:
    _agree(snapshot, bw.build_index(snapshot, CancelToken()), needle)


@pytest.mark.parametrize("query", [
    "zq09977", "ZQ0997", "roast", "röstung", "x86_64", "zq09977 is", "s zq", " ", "...", "e",
    "ss", "STRASSE", "straße",
    "İstanbul", "i̇", "ς", "σίγμα", "東京", "c++", "_case_", "3.14", "x86_6", "roast roast r",
    "a\tt", "e\nnew", "notaword", "alpha here, only", "://example.com/a_",
])
def test_known_needles(snapshot: Snapshot, query: str) -> None:
    _agree(snapshot, bw.build_index(snapshot, CancelToken()), fold(query))


def test_a_rare_word_leaves_one_candidate(snapshot: Snapshot) -> None:
    index = bw.build_index(snapshot, CancelToken())
    assert index.candidates("zq09977") == {"b/zeta"}
    assert index.candidates("zq09977 is rare") == {"b/zeta"}
    assert index.candidates("zz_absent") == set()
    assert index.candidates(" ") is None  # no word character: nothing to narrow by
    # "roasting", "roasted" too
    assert index.candidates("roast") == {"a/alpha", "c/iota", "d/kappa"}
    assert index.candidates("a") is None  # in every concept's words: the scan is as quick
    assert index.holders("a") == {cid for cid, doc in snapshot.concepts.items()
                                  if "a" in fold(doc.body)}  # but the index holds the answer
    assert index.holders("zq09977") == {"b/zeta"}
    assert index.holders("zq09977 is") is None  # not one word: candidates, then checked
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(bw, "HOLDER_POSTINGS", 0)
        assert index.holders("zq09977") is None  # past the postings it joins
    assert index.candidates("a", every=True) == {  # unless each candidate is worked anyway
        cid for cid, doc in snapshot.concepts.items() if "a" in fold(doc.body)}


def test_an_uppercase_needle_is_in_no_fold(snapshot: Snapshot) -> None:
    """The scan searches texts as written only for a needle that is its own fold: one with a
    capital is in no folded body, though written in some."""
    columns = sc._fields(snapshot, CancelToken())
    assert "ROAST" in snapshot.concepts["c/iota"].text
    assert list(columns._scanned("ROAST", CancelToken())) == []
    assert not any(doc.folded_body_holds("ROAST") for doc in snapshot.concepts.values())


_TERMS = sorted(set(si.tokens(RAW)) | set(si.tokens(" ".join(TITLES.values()))))


_ANY_TERM = st.one_of(st.sampled_from(_TERMS), st.sampled_from(_TERMS).map(lambda t: t[:2]),
                     st.text(alphabet="aeiorstnxzq0123456789ßσ", min_size=1, max_size=4)
                     .map(fold))


@settings(max_examples=150, deadline=None)
@given(terms=st.lists(_ANY_TERM, min_size=1, max_size=3, unique=True))
def test_section_postings_narrowed_by_the_index_are_the_scans(
    snapshot: Snapshot, terms: list[str]
) -> None:
    """search_sections folds and searches only the bodies the index names (every body
    without it): the postings are the same either way, for a term that is one run of word
    characters (the index names exactly the bodies holding it) or not ('x́y': a combining mark
    between two letters, two runs of the index's words). A pass for several terms makes each
    term's postings as a pass for it alone does."""
    assert "x\u0301y" in _TERMS
    index = bw.build_index(snapshot, CancelToken())
    found = {}
    for kept_index in (lambda view: index, lambda view: None):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(si, "kept_index", kept_index)
            together = si._postings(snapshot, terms, CancelToken())
            alone = {t: si._postings(snapshot, [t], CancelToken())[t] for t in terms}
        assert list(together) == terms
        found[kept_index(snapshot) is None] = {t: list(p) for t, p in together.items()}
        assert found[kept_index(snapshot) is None] == {t: list(p) for t, p in alone.items()}
    assert found[False] == found[True]


def _comparable(index: bw.BodyWordIndex) -> dict[str, list[str]]:
    """Each word → its concepts' IDs (the numbers are the index's own)."""
    concepts = index.concepts
    assert sorted(index.numbers) == sorted(c for c in concepts if c is not None)
    assert all(concepts[n] == c for c, n in index.numbers.items())
    assert list(index.postings) == list(index.words)
    for word, start in zip(index.words, index.starts, strict=True):
        assert index.vocabulary[start - 1:start + len(word) + 1] == f"\n{word}\n"
    out = {}
    for word, numbers in index.postings.items():
        assert list(numbers) == sorted(numbers)
        out[word] = sorted(c for n in numbers if (c := concepts[n]) is not None)
    return out


_NAMES = st.sampled_from(["a/alpha", "a/beta", "b/zeta", "c/new", "c/eta", "d/other"])
_TEXTS = st.sampled_from([*BODIES.values(), "zq09977 moved here", "---\ntitle: [unclosed\n"])


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(_NAMES, st.none() | _TEXTS, min_size=1, max_size=4),
       st.lists(NEEDLES, min_size=1, max_size=4))
def test_an_updated_index_equals_the_index_built_anew(
    snapshot: Snapshot, changes: dict[str, str | None], needles: list[str]
) -> None:
    """Deleting, creating, editing, breaking a file, several at once: the index updated from the
    previous capture's holds what a build gives, and narrows the search as soundly."""
    before = _assembled(dict(snapshot.documents.cells))
    earlier = bw.build_index(before, CancelToken())
    cells = dict(before.documents.cells)
    for name, text in changes.items():
        if text is None:
            cells.pop(f"{name}.md", None)
        else:
            cells.update(_cells({f"{name}.md": text if text.startswith("---") else concept(text)}))
    after = _assembled(cells, predecessor=before)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(bw, "MAX_UPDATED_SHARE", 100.0)  # update however much changed
        updated = bw.updated_index(earlier, before, after, CancelToken())
    assert updated is not None
    assert _comparable(updated) == _comparable(bw.build_index(after, CancelToken()))
    for needle in needles:
        _agree(after, updated, needle)


def test_a_change_updates_the_previous_index_instead_of_building_one(snapshot: Snapshot) -> None:
    """With the previous capture held and its index built, the next capture's index is that one
    updated: only the changed concept's new body is split into words (its earlier words are
    found in the postings: its earlier text may be gone from its file), and the words it did
    not touch keep their postings."""
    files = {f"f{n % 5}/item-{n:03d}.md": concept(f"Item {n} body words w{n}") for n in range(200)}
    before = _assembled(_cells(files))
    earlier = bw.index_of(before, CancelToken())
    cells = dict(before.documents.cells)
    cells.update(_cells({"f3/item-013.md": concept("Item 13 now says zq09977")}))
    after = _assembled(cells, predecessor=before)
    split: list[str] = []
    real_words, real_build = bw.body_words, bw.build_index
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(bw, "body_words", lambda body: split.append(body) or real_words(body))
        patch.setattr(bw, "build_index", lambda *a: pytest.fail("built anew"))
        index = bw.index_of(after, CancelToken())
    assert len(split) == 1  # the new body's words in; the old body is never read
    assert kept(after, bw.BODY_WORDS) is index
    assert index.candidates("zq09977") == {"f3/item-013"}
    assert index.postings["w100"] is earlier.postings["w100"]
    assert _comparable(index) == _comparable(real_build(after, CancelToken()))


def test_an_index_further_back_is_updated_when_the_predecessor_has_none(
        snapshot: Snapshot) -> None:
    """Two changes in quick succession, the first capture's warm-up never reached: the second's
    index is the one before them updated over both (as a build gives), not built anew."""
    files = {f"f{n % 5}/item-{n:03d}.md": concept(f"Item {n} body words w{n}") for n in range(200)}
    first = _assembled(_cells(files))
    bw.index_of(first, CancelToken())
    cells = dict(first.documents.cells)
    cells.update(_cells({"f3/item-013.md": concept("Item 13 now says zq09977")}))
    edited = _assembled(dict(cells), predecessor=first)
    del cells["f1/item-001.md"]
    after = _assembled(cells, predecessor=edited)
    real_build = bw.build_index
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(bw, "build_index", lambda *a: pytest.fail("built anew"))
        index = bw.index_of(after, CancelToken())
    assert kept(edited, bw.BODY_WORDS) is None
    assert index.candidates("zq09977") == {"f3/item-013"}
    assert _comparable(index) == _comparable(real_build(after, CancelToken()))


SEARCH_GOLDENS = [p for p in golden_runner.golden_paths() if p.parent.name == "search_concepts"]


@pytest.mark.parametrize("path", SEARCH_GOLDENS, ids=golden_runner.case_id)
def test_every_golden_answer_is_the_same_with_the_index(
    path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The goldens run without the warm-up, so with no index; here each call builds and uses
    one, and must give the recorded outcome byte for byte."""
    used: list[bw.BodyWordIndex] = []

    def built(view: Snapshot) -> bw.BodyWordIndex:
        used.append(bw.index_of(view, CancelToken()))
        return used[-1]

    monkeypatch.setattr(sc, "kept_index", built)
    case = golden_runner.load_case(path)
    outcome = golden_runner.run_case({**case, "tool": "search_concepts"}, tmp_path)
    assert outcome == case["expected"]
    assert used or outcome["is_error"]
