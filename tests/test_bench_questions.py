"""bench/questions/*.jsonl and bench/question_set.py: the hand-written question set.

The files are checked as data (enough questions, unique ids, both splits, answers that exist
and a recorded easy/hard flag that agrees with the mechanical check); the check itself, the
BM25 baseline and the question table of bench/quality.py are checked on hand-made inputs.
The figures the table measures are never asserted.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
CORPORA = ROOT.parent / "shared" / "corpora"
MIN_QUESTIONS = 150


def _load(name: str, path: Path) -> Iterator[ModuleType]:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        del sys.modules[spec.name]


@pytest.fixture(scope="module")
def qs() -> Iterator[ModuleType]:
    yield from _load("question_set", ROOT / "bench" / "question_set.py")


@pytest.fixture(scope="module")
def quality(qs: ModuleType) -> Iterator[ModuleType]:
    yield from _load("bench_quality_questions", ROOT / "bench" / "quality.py")


@pytest.fixture(scope="module")
def questions(qs: ModuleType) -> list[object]:
    return [q for corpus in qs.CORPORA for q in qs.load_questions(corpus)]


def _corpus_root(corpus: str) -> Path:
    root = CORPORA / corpus
    if not root.is_dir():
        pytest.skip(f"corpus {corpus} not found at {root} (../shared/corpora from the "
                    "repository root): the answer pages cannot be checked")
    return root


# -- the question files as data ---------------------------------------------------------------


def test_enough_questions_with_unique_ids_and_valid_fields(qs: ModuleType,
                                                           questions: list[object]) -> None:
    assert len(questions) >= MIN_QUESTIONS
    ids = Counter(q.id for q in questions)  # type: ignore[attr-defined]
    assert [i for i, n in ids.items() if n > 1] == []
    per_corpus = Counter(q.corpus for q in questions)  # type: ignore[attr-defined]
    for corpus in qs.CORPORA:  # roughly split across the three corpora
        assert per_corpus[corpus] >= len(questions) // 5, per_corpus
    for q in questions:
        assert q.question.strip() and q.why.strip(), q.id  # type: ignore[attr-defined]
        assert 1 <= len(q.answers) <= 3, q.id  # type: ignore[attr-defined]
        assert len(set(q.answers)) == len(q.answers), q.id  # type: ignore[attr-defined]
        assert not set(q.copies) & set(q.answers), q.id  # type: ignore[attr-defined]
        assert q.difficulty in (qs.EASY, qs.HARD), q.id  # type: ignore[attr-defined]


def test_split_is_the_hash_of_the_id_and_about_half(qs: ModuleType,
                                                    questions: list[object]) -> None:
    for q in questions:
        assert q.split == qs.split_of(q.id), q.id  # type: ignore[attr-defined]
    report = sum(1 for q in questions if q.split == qs.REPORT)  # type: ignore[attr-defined]
    assert 0.4 <= report / len(questions) <= 0.6, report
    for corpus in qs.CORPORA:
        mine = [q for q in questions if q.corpus == corpus]  # type: ignore[attr-defined]
        held_out = sum(1 for q in mine if q.split == qs.REPORT)  # type: ignore[attr-defined]
        assert 0.3 <= held_out / len(mine) <= 0.7, (corpus, held_out, len(mine))


def test_many_questions_are_hard(qs: ModuleType, questions: list[object]) -> None:
    """The set exists to measure questions asked in a person's words, not the page's."""
    hard = sum(1 for q in questions if q.difficulty == qs.HARD)  # type: ignore[attr-defined]
    assert hard >= 0.4 * len(questions)
    assert len(questions) - hard >= 20  # and enough easy ones to compare with


def test_most_questions_avoid_their_answer_titles(qs: ModuleType,
                                                 questions: list[object]) -> None:
    """Most questions describe the goal without a word of the answer page's title (headings
    may still share one: then the question is easy)."""
    without = 0
    for q in questions:
        root = _corpus_root(q.corpus)  # type: ignore[attr-defined]
        asked = qs.content_words(q.question)  # type: ignore[attr-defined]
        titles = [qs.page_outline(root, a).title for a in q.answers]  # type: ignore[attr-defined]
        if not any(asked & qs.content_words(title) for title in titles):
            without += 1
    assert without >= 0.6 * len(questions), without


@pytest.mark.parametrize("corpus", ["cpp-docs", "pnpm-docs", "vcpkg-docs"])
def test_answer_pages_exist_and_difficulty_agrees_with_the_check(qs: ModuleType,
                                                                  corpus: str) -> None:
    root = _corpus_root(corpus)
    for q in qs.load_questions(corpus):
        for path in (*q.answers, *q.copies):
            assert (root / path).is_file(), f"{q.id}: {path} is not in {root}"
        outlines = [qs.page_outline(root, path) for path in q.answers]
        shared = qs.shared_words(q.question, outlines)
        assert q.difficulty == (qs.EASY if shared else qs.HARD), (q.id, sorted(shared))
        if q.difficulty == qs.HARD:
            asked = " ".join(q.question.casefold().split())
            for outline in outlines:
                title = " ".join(outline.title.casefold().split())
                assert title not in asked, (q.id, outline.title)


@pytest.mark.parametrize("corpus", ["cpp-docs", "pnpm-docs", "vcpkg-docs"])
def test_answer_pages_are_concepts_the_server_serves(qs: ModuleType, corpus: str) -> None:
    """A page that does not parse is skipped by the bench's server and could never be a hit."""
    from bundle_mcp.loader.document import parse_document

    root = _corpus_root(corpus)
    for q in qs.load_questions(corpus):
        for path in (*q.answers, *q.copies):
            doc = parse_document(path, (root / path).read_bytes())
            assert doc.concept_id is not None and doc.parse_error is None, (q.id, path)


# -- the mechanical check ----------------------------------------------------------------------


def test_stem_merges_plural_and_verb_forms(qs: ModuleType) -> None:
    for group in (("thread", "threads"), ("cache", "cached", "caches", "caching"),
                  ("build", "builds", "building"), ("library", "libraries"),
                  ("package", "packages", "packaged")):
        assert len({qs.stem(w) for w in group}) == 1, group
    assert qs.stem("class") == "class" and qs.stem("glass") == "glass"  # -ss stays


def test_content_words_drop_stop_words_tags_and_product_names(qs: ModuleType) -> None:
    assert qs.content_words("How do I keep vcpkg from using the <a name='x'></a> Caches?") == {
        qs.stem("caches")}
    assert qs.content_words("won't it work with Visual Studio?") == set()
    assert qs.content_words("C++20 modules") == {"20", qs.stem("modules")}


def test_difficulty_compares_title_and_every_heading(qs: ModuleType) -> None:
    page = qs.PageOutline("a.md", "Binary caching", ("Overview", "Disable the default cache"))
    assert qs.difficulty_of("Where are prebuilt libraries kept?", [page]) == qs.HARD
    assert qs.difficulty_of("How do I turn off the default?", [page]) == qs.EASY
    assert qs.shared_words("Binaries: are they cached?", [page]) == {"binary", qs.stem("cached")}
    other = qs.PageOutline("b.md", "Prebuilt packages", ())
    assert qs.difficulty_of("Where are prebuilt libraries kept?", [page, other]) == qs.EASY


def test_page_outline_reads_title_and_headings_outside_code(qs: ModuleType,
                                                            tmp_path: Path) -> None:
    (tmp_path / "p.md").write_text(
        "---\ntitle: The Title\n---\n# Heading one\n\n```sh\n# not a heading\n```\n"
        "## <a name=\"x\"></a> Second\n", encoding="utf-8")
    outline = qs.page_outline(tmp_path, "p.md")
    assert outline.title == "The Title"
    assert outline.headings == ("Heading one", '<a name="x"></a> Second')
    assert qs.outline_words(outline) == {qs.stem(w) for w in ("title", "heading", "second")}


def test_split_of_is_stable_and_uses_both_halves(qs: ModuleType) -> None:
    assert qs.split_of("vcpkg-001") == qs.split_of("vcpkg-001")
    assert {qs.split_of(f"x-{n:03}") for n in range(20)} == {qs.TUNE, qs.REPORT}


def test_load_questions_names_the_bad_line(qs: ModuleType, tmp_path: Path) -> None:
    (tmp_path / "vcpkg-docs.jsonl").write_text('{"id": "a"}\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"vcpkg-docs\.jsonl:1"):
        qs.load_questions("vcpkg-docs", tmp_path)
    assert qs.load_questions("pnpm-docs", tmp_path) == []


# -- BM25 over files ---------------------------------------------------------------------------


def test_file_bm25_ranks_by_rarity_and_frequency(qs: ModuleType) -> None:
    index = qs.FileBM25([
        ("a", "the cache of packages the the the"),
        ("b", "cache cache cache hoisting"),
        ("c", "the store"),
        ("d", "unrelated words only"),
    ])
    assert index.rank("hoisting cache", 10) == ["b", "a"]
    assert index.rank("store", 10) == ["c"]
    assert index.rank("nothing matches", 10) == []
    assert index.rank("the", 1) == ["a"]  # more occurrences of the same term win
    assert qs.FileBM25([]).rank("x", 5) == []


def test_first_answer_rank(qs: ModuleType, quality: ModuleType) -> None:
    assert qs.first_answer_rank(["x", "a", "b"], ["b", "a"]) == 2
    assert qs.first_answer_rank(["x"], ["a"]) is None
    hits = (quality.Hit("x"), quality.Hit("a", 1, 3))
    assert quality.question_rank(hits, frozenset({"a"})) == 2
    assert quality.mrr_at([1, 2, None, 11], 10) == pytest.approx((1 + 0.5) / 4)


# -- the question table end to end ------------------------------------------------------------


def _tiny_corpus(root: Path) -> None:
    pages = {
        "guide/caching.md": "---\ntitle: Binary caching\n---\n# Binary caching\n\nPrebuilt "
                            "archives are reused from the cache folder between builds.\n",
        "guide/triplets.md": "---\ntitle: Triplets\n---\n# Triplets\n\nA triplet names the "
                             "target architecture and the linkage of libraries.\n",
        "reference/env.md": "---\ntitle: Environment variables\n---\n# Environment variables\n\n"
                            "## VCPKG_MAX_CONCURRENCY\n\nLimits the parallel jobs of builds.\n",
    }
    for path, text in pages.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text, encoding="utf-8")


def test_question_table_on_a_tiny_corpus(qs: ModuleType, quality: ModuleType, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    corpora, folder = tmp_path / "corpora", tmp_path / "questions"
    _tiny_corpus(corpora / "vcpkg-docs")
    folder.mkdir()
    lines = []
    for n, (question, answer) in enumerate([
            ("Are prebuilt archives reused between builds?", "guide/caching.md"),
            ("How do I limit parallel jobs?", "reference/env.md"),
            ("Which linkage does the target architecture use?", "guide/triplets.md"),
            ("Where is the missing page?", "guide/absent.md")]):
        qid = f"t-{n}"
        lines.append(json.dumps({"id": qid, "question": question, "answers": [answer],
                                 "copies": [], "difficulty": qs.HARD, "split": qs.split_of(qid),
                                 "why": "test"}))
    (folder / "vcpkg-docs.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    out, md = tmp_path / "q.json", tmp_path / "q.md"
    assert quality.main(["--questions-only", "--corpus", "vcpkg-docs", "--corpus", "pnpm-docs",
                         "--corpora-dir", str(corpora), "--questions-dir", str(folder),
                         "--questions-md", str(md), "--no-semantic", "--json", str(out)]) == 0
    printed = capsys.readouterr()
    assert "### Questions: vcpkg-docs" in printed.out
    assert "## Retrieval quality" not in printed.out  # --questions-only: no known-item tables
    assert "Answer pages not served as concepts: t-3: guide/absent.md" in printed.out
    written = md.read_text(encoding="utf-8")
    assert written.startswith("# Hand-written questions") and "--questions-only" in written
    report = json.loads(out.read_text(encoding="utf-8"))
    vcpkg, pnpm = report["corpora"]
    assert pnpm == {"name": "pnpm-docs", "skipped": pnpm["skipped"]}
    measured = vcpkg["questions"]
    assert measured["questions"] == 4
    assert measured["skipped_systems"]["search_semantic"] == "disabled by --no-semantic"
    rows = {(r["system"], r["split"], r["difficulty"]): r for r in measured["rows"]}
    for split in (qs.REPORT, qs.TUNE):
        bm25 = rows[(quality.BM25_FILES, split, quality.ALL)]
        assert bm25["questions"] == sum(1 for n in range(4) if qs.split_of(f"t-{n}") == split)
        assert bm25["questions"] == (rows[(quality.BM25_FILES, split, qs.HARD)]["questions"]
                                     + rows[(quality.BM25_FILES, split, qs.EASY)]["questions"])
    ranks = {d["id"]: d["ranks"][quality.BM25_FILES]["rank"] for d in measured["details"]}
    assert ranks == {"t-0": 1, "t-1": 1, "t-2": 1, "t-3": None}  # each page owns its words
    targets = {t["target"]: t for t in report["question_targets"]}
    assert set(targets) == {"context answer first ≥ 75%", "context answer in pack ≥ 95%",
                            "context hit@5 ≥ BM25 over files + 15 points"}
    from bundle_mcp.tools import TOOL_MODULES

    if "context" in TOOL_MODULES:
        context = [d["ranks"]["context"] for d in measured["details"]]
        assert context[3]["rank"] is None and all(c["error"] is None for c in context)


def test_a_partial_run_leaves_the_committed_figures_alone(
        quality: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    corpora, folder = tmp_path / "corpora", tmp_path / "questions"
    _tiny_corpus(corpora / "vcpkg-docs")
    folder.mkdir()
    (folder / "vcpkg-docs.jsonl").write_text(json.dumps({
        "id": "t-0", "question": "limit parallel jobs", "answers": ["reference/env.md"],
        "copies": [], "difficulty": "easy", "split": "tune", "why": "test"}) + "\n",
        encoding="utf-8")
    default = tmp_path / "results" / "questions.md"
    monkeypatch.setattr(quality, "DEFAULT_QUESTIONS_MD", default)
    assert quality.main(["--questions-only", "--corpus", "vcpkg-docs", "--corpora-dir",
                         str(corpora), "--questions-dir", str(folder), "--no-semantic"]) == 0
    assert "### Questions: vcpkg-docs" in capsys.readouterr().out
    assert not default.exists()  # one corpus of three: printed, not written


def test_no_questions_leaves_the_table_out(quality: ModuleType, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    md = tmp_path / "q.md"
    assert quality.main(["--corpus", "generated", "--generated-concepts", "20", "--queries",
                         "3", "--no-semantic", "--rg", str(tmp_path / "no-rg"),
                         "--no-questions", "--questions-md", str(md)]) == 0
    printed = capsys.readouterr()
    assert "### generated" in printed.out and "Hand-written questions" not in printed.out
    assert not md.exists()
