"""The hand-written question set (bench/questions/<corpus>.jsonl): loading, the mechanical
easy/hard check, the tune/report split, and the BM25-over-files baseline.

Each line of a question file is one JSON object:

    {"id": "vcpkg-001", "question": "...", "answers": ["path/of/page.md", ...], "copies": [],
     "difficulty": "hard", "split": "report", "why": "the passage that answers"}

- ``answers``: 1-3 pages, paths relative to the corpus root, judged by reading them;
- ``copies``: the same answering passage kept again for the latest release (pnpm-docs keeps
  its current docs in ``docs/`` and the 10.x release in ``versioned_docs/version-10.x/``): a
  ranking that returns the copy has found the answer too. Not part of the easy/hard check;
- ``difficulty``: ``hard`` when no answer page's title or headings share a content word with
  the question (:func:`shared_words`), else ``easy``; the file records it, the test recomputes it;
- ``split``: :func:`split_of` the id: ``tune`` (ranking may be tuned on it) or ``report``
  (held out: the figures a change is judged by).

    python bench/question_set.py check   # every question: computed difficulty, the words it shares
    python bench/question_set.py fill    # write the computed difficulty and split into the files
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import re
import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from bundle_mcp.loader.document import parse_document
from bundle_mcp.okf.names import concept_name

HERE = Path(__file__).resolve().parent
QUESTIONS_DIR = HERE / "questions"
DEFAULT_CORPORA = HERE.parent.parent / "shared" / "corpora"
CORPORA = ("cpp-docs", "pnpm-docs", "vcpkg-docs")
EASY, HARD = "easy", "hard"
TUNE, REPORT = "tune", "report"
FIELDS = ("id", "question", "answers", "copies", "difficulty", "split", "why")

# Words that carry no topic: English function words, the words people wrap a question in, and
# the products' own names (every page of a corpus is about vcpkg, pnpm or Visual C++, so
# sharing that word with a title says nothing about finding the page).
STOP_WORDS = frozenset("""
a about above after again against all also am an and any are as at be because been before
being below between both but by can cannot could did do does doing done don down during each
else even ever every few for from further get gets getting got had has have having he her here
hers him his how i if in into is it its itself just let lets like may me might mine more most
much must my myself need needs no nor not now of off on once one only or other our ours out
over own per please rather same say says see seem seems shall she should show so some
something somehow still such than that the their theirs them then there these they thing
things this those though through to too try trying under until up upon us use used uses using
very via want wants was way we well were what whatever when where whether which while who
whom whose why will with within without won would yes yet you your yours instead keep kept
later make makes making go goes going put know tell work works working actually really
anything everything nothing someone anyone already again able s t d ll m re ve isn aren wasn
weren doesn didn hasn haven hadn wouldn shouldn couldn mustn
vcpkg pnpm microsoft visual studio
""".split())

_WORD = re.compile(r"[^\W_]+")
_TAG = re.compile(r"<[^>]*>")


def stem(word: str) -> str:
    """A light suffix strip, so thread/threads, cache/cached/caches and build/building count
    as one word: one of -ies (→ y), -ing, -ed, -s (not -ss), then a final -e. The same function
    runs on both sides of every comparison, so its crudeness can only merge words."""
    for suffix, keep in (("ies", "y"), ("ing", ""), ("ed", ""), ("s", "")):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3 and not word.endswith("ss"):
            word = word[: len(word) - len(suffix)] + keep
            break
    return word[:-1] if word.endswith("e") and len(word) > 3 else word


def content_words(text: str) -> set[str]:
    """The stemmed content words of ``text``: case-folded runs of letters and digits, HTML tags
    (heading anchors) removed, stop words and one-letter words dropped."""
    found = _WORD.findall(_TAG.sub(" ", text).casefold())
    return {stem(w) for w in found if len(w) > 1 and w not in STOP_WORDS}


@dataclass(frozen=True)
class PageOutline:
    path: str
    title: str  # the display name every tool uses (concept_name)
    headings: tuple[str, ...]


def page_outline(corpus_root: Path, path: str) -> PageOutline:
    """Title and headings of one page, parsed the way the server parses it."""
    doc = parse_document(path, (corpus_root / path).read_bytes())
    headings = tuple(s.heading for s in doc.markdown.sections if s.heading)
    return PageOutline(path, concept_name(doc), headings)


def outline_words(outline: PageOutline) -> set[str]:
    words = content_words(outline.title)
    for heading in outline.headings:
        words |= content_words(heading)
    return words


def shared_words(question: str, outlines: Iterable[PageOutline]) -> set[str]:
    """The question's content words that some answer page's title or headings also have."""
    asked = content_words(question)
    shared: set[str] = set()
    for outline in outlines:
        shared |= asked & outline_words(outline)
    return shared


def difficulty_of(question: str, outlines: Iterable[PageOutline]) -> str:
    return EASY if shared_words(question, outlines) else HARD


def split_of(question_id: str) -> str:
    """``tune`` or ``report``, from the id alone: stable across edits of the question."""
    return TUNE if hashlib.sha256(question_id.encode("utf-8")).digest()[0] % 2 == 0 else REPORT


@dataclass(frozen=True)
class Question:
    id: str
    corpus: str
    question: str
    answers: tuple[str, ...]
    copies: tuple[str, ...]  # the same answering passage in the latest release's docs folder
    difficulty: str
    split: str
    why: str


def question_file(corpus: str, folder: Path = QUESTIONS_DIR) -> Path:
    return folder / f"{corpus}.jsonl"


def load_questions(corpus: str, folder: Path = QUESTIONS_DIR) -> list[Question]:
    path = question_file(corpus, folder)
    if not path.is_file():
        return []
    out = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
            out.append(Question(raw["id"], corpus, raw["question"], tuple(raw["answers"]),
                                tuple(raw.get("copies", ())), raw["difficulty"],
                                raw["split"], raw["why"]))
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{path}:{n}: not a question line ({exc})") from exc
    return out


# --------------------------------------------------------------------------------------------
# The baseline: Okapi BM25 over whole files


_BM25_WORD = re.compile(r"[^\W_]+")


def bm25_tokens(text: str) -> list[str]:
    """Case-folded runs of letters and digits; nothing dropped, nothing stemmed: the textbook
    baseline a reader would write first."""
    return _BM25_WORD.findall(text.casefold())


class FileBM25:
    """Okapi BM25 (k1 = 1.5, b = 0.75, idf = ln(1 + (N - n + 0.5) / (n + 0.5))) where each
    document is one whole file, frontmatter included."""

    def __init__(self, docs: Sequence[tuple[str, str]], k1: float = 1.5, b: float = 0.75):
        self.names = [name for name, _ in docs]
        self.k1, self.b = k1, b
        self.lengths: list[int] = []
        self.postings: dict[str, list[tuple[int, int]]] = {}
        for n, (_, text) in enumerate(docs):
            counts = Counter(bm25_tokens(text))
            self.lengths.append(sum(counts.values()))
            for term, tf in counts.items():
                self.postings.setdefault(term, []).append((n, tf))
        self.average = sum(self.lengths) / len(self.lengths) if self.lengths else 0.0

    def rank(self, query: str, top: int) -> list[str]:
        """The names of the ``top`` best files, best first (ties by name)."""
        total = len(self.names)
        scores: dict[int, float] = {}
        for term in set(bm25_tokens(query)):
            posting = self.postings.get(term, [])
            idf = math.log(1 + (total - len(posting) + 0.5) / (len(posting) + 0.5))
            for n, tf in posting:
                norm = self.k1 * (1 - self.b + self.b * self.lengths[n] / self.average)
                scores[n] = scores.get(n, 0.0) + idf * tf * (self.k1 + 1) / (tf + norm)
        best = sorted(scores.items(), key=lambda item: (-item[1], self.names[item[0]]))
        return [self.names[n] for n, _ in best[:top]]


# --------------------------------------------------------------------------------------------
# Metrics over answer sets


def first_answer_rank(ranked: Sequence[str], answers: Iterable[str]) -> int | None:
    """1-based rank of the first ranked page that is an answer, or None."""
    wanted = set(answers)
    for rank, page in enumerate(ranked, 1):
        if page in wanted:
            return rank
    return None


def check(corpora_dir: Path) -> int:
    for corpus in CORPORA:
        root = corpora_dir / corpus
        for q in load_questions(corpus):
            outlines = [page_outline(root, a) for a in q.answers if (root / a).is_file()]
            missing = [a for a in q.answers if not (root / a).is_file()]
            shared = shared_words(q.question, outlines)
            computed = EASY if shared else HARD
            flag = "" if computed == q.difficulty and q.split == split_of(q.id) else "  MISMATCH"
            print(f"{q.id} {computed:4} {q.split:6} {sorted(shared)}{flag}"
                  + (f" MISSING {missing}" if missing else ""))
    return 0


def fill(corpora_dir: Path) -> int:
    """Rewrite each question file with ``difficulty`` and ``split`` computed (after adding or
    editing questions: the test fails on a recorded value that disagrees)."""
    for corpus in CORPORA:
        path = question_file(corpus)
        if not path.is_file():
            continue
        root = corpora_dir / corpus
        lines = []
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            raw = json.loads(line)
            outlines = [page_outline(root, a) for a in raw["answers"]]
            raw["difficulty"] = difficulty_of(raw["question"], outlines)
            raw["split"] = split_of(raw["id"])
            raw.setdefault("copies", [])
            lines.append(json.dumps({k: raw[k] for k in FIELDS}, ensure_ascii=False))
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=("check", "fill"))
    parser.add_argument("--corpora-dir", type=Path, default=DEFAULT_CORPORA)
    args = parser.parse_args(argv)
    return check(args.corpora_dir) if args.command == "check" else fill(args.corpora_dir)


if __name__ == "__main__":
    sys.exit(main())
