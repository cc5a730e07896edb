"""Retrieval quality: does each search find the concept or section a query was derived from?

Queries come from the documents themselves, so every query has one known answer and nobody
labels anything by hand:

- **concept queries**: a concept's frontmatter ``description`` → that concept. Descriptions
  shared by several concepts, and descriptions of fewer than 3 words, are left out;
- **section queries**: a heading's words minus the words of its concept's title → that section
  (concept and line range). Only word sets of at least 2 words that no other heading of the
  corpus yields are kept: anything else has no single right answer.

At most ``--queries`` queries of each kind are sampled per corpus with a fixed seed. Every system
is called through the real dispatch core (``Dispatcher(ServeConfig(...)).call``), one loaded
snapshot per corpus; the naive baseline is ripgrep over the same files. For each query and
system the rank of the answer gives recall@1, recall@5 and MRR (over the top 10, or over the
whole pack for ``context``), and the answer's size gives its token cost, estimated as
ceil(UTF-8 bytes of the structured JSON / 4).

Corpora: ``../shared/corpora/{cpp-docs,pnpm-docs,vcpkg-docs}`` from the repository root (a missing
one is skipped with a message) and a bundle generated here (``generate_bundle``, fixed seed).

    python bench/quality.py                       # all corpora, 200 queries per kind
    python bench/quality.py --corpus vcpkg-docs --queries 50 --json /tmp/quality.json
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import random
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bundle_mcp.cancel import CancelToken
from bundle_mcp.dispatch import Dispatcher, Outcome, ServeConfig, to_json
from bundle_mcp.model import Snapshot
from bundle_mcp.okf.names import concept_name
from bundle_mcp.okf.properties import text_field
from bundle_mcp.semantic import SemanticIndex

sys.path.insert(0, str(Path(__file__).resolve().parent))
import question_set  # noqa: E402 - a sibling script, not a package

REPO = Path(__file__).resolve().parent.parent
DEFAULT_CORPORA = REPO.parent / "shared" / "corpora"
CORPORA = ("cpp-docs", "pnpm-docs", "vcpkg-docs")
GENERATED = "generated"
DEFAULT_QUERIES = 200
DEFAULT_SEED = 42
GENERATED_CONCEPTS = 1000
GENERATED_SEED = 20261203
TOP = 10  # every ranked system is asked for 10 hits; ranks beyond 10 count as a miss
CONCEPT, SECTION = "concept", "section"
DEFAULT_QUESTIONS_MD = REPO / "bench" / "results" / "questions.md"
TOKEN_NOTE = "tokens = ceil(UTF-8 bytes of the answer's structured JSON / 4), an estimate"
CONTEXT_FOUND_TARGET = 0.90
SECTIONS_OVER_RG_POINTS = 20.0
CONTEXT_MEDIAN_TOKENS = 4000

_WORD = re.compile(r"[^\W_]+")


def words(text: str) -> list[str]:
    """The case-folded words of ``text``: runs of letters and digits (underscore splits)."""
    return _WORD.findall(text.casefold())


def distinct(items: Iterable[str]) -> list[str]:
    """The items without repeats, in first-occurrence order."""
    return list(dict.fromkeys(items))


# --------------------------------------------------------------------------------------------
# Queries with a known answer


@dataclass(frozen=True)
class SectionOutline:
    heading: str | None  # None for the preamble before the first heading
    line_start: int
    line_end: int


@dataclass(frozen=True)
class ConceptOutline:
    """What query derivation reads of a concept: its ID, name, description and sections."""

    concept_id: str
    path: str
    title: str  # the display name: frontmatter title, else first heading, else ID segment
    description: str
    sections: tuple[SectionOutline, ...]


@dataclass(frozen=True)
class Query:
    kind: str  # CONCEPT or SECTION
    text: str
    words: tuple[str, ...]
    concept_id: str
    line_start: int | None = None  # the target section (section queries)
    line_end: int | None = None


def outlines(snapshot: Snapshot) -> list[ConceptOutline]:
    out = []
    for concept_id, doc in snapshot.concepts.items():
        sections = tuple(
            SectionOutline(s.heading, s.line_start, s.line_end) for s in doc.markdown.sections
        )
        out.append(ConceptOutline(concept_id, doc.path, concept_name(doc),
                                  text_field(doc.fm, "description").strip(), sections))
    return out


def concept_queries(concepts: Sequence[ConceptOutline]) -> list[Query]:
    """Each description of 3 words or more that no other concept shares → its concept.

    Two descriptions are the same when they are equal after case folding and collapsing
    whitespace ("Learn more about: vector" twice means neither can name one concept)."""
    def key(description: str) -> str:
        return " ".join(description.split()).casefold()

    counts = Counter(key(c.description) for c in concepts if c.description)
    out = []
    for c in concepts:
        if not c.description or counts[key(c.description)] > 1:
            continue
        found = words(c.description)
        if len(found) < 3:
            continue
        out.append(Query(CONCEPT, c.description, tuple(found), c.concept_id))
    return out


def heading_query_words(heading: str, title: str) -> list[str]:
    """A heading's distinct words, minus every word of the concept's title, in heading order."""
    title_words = set(words(title))
    return distinct(w for w in words(heading) if w not in title_words)


def section_queries(concepts: Sequence[ConceptOutline]) -> list[Query]:
    """Each heading whose words minus the title's words leave ≥ 2 words, as a set no other
    heading of the corpus leaves → that section."""
    candidates = []
    for c in concepts:
        for s in c.sections:
            if not s.heading:
                continue
            remaining = heading_query_words(s.heading, c.title)
            if len(remaining) >= 2:
                candidates.append((frozenset(remaining), remaining, c, s))
    counts = Counter(key for key, _, _, _ in candidates)
    return [
        Query(SECTION, " ".join(remaining), tuple(remaining), c.concept_id, s.line_start,
              s.line_end)
        for key, remaining, c, s in candidates
        if counts[key] == 1
    ]


def sample(queries: Sequence[Query], n: int, seed: int) -> list[Query]:
    """At most ``n`` queries, the same ones for the same input and seed."""
    ordered = sorted(queries, key=lambda q: (q.concept_id, q.line_start or 0, q.text))
    if len(ordered) <= n:
        return ordered
    picked = random.Random(seed).sample(range(len(ordered)), n)
    return [ordered[i] for i in sorted(picked)]


# --------------------------------------------------------------------------------------------
# Answers, ranks and metrics


@dataclass(frozen=True)
class Hit:
    concept_id: str
    line_start: int | None = None
    line_end: int | None = None


@dataclass(frozen=True)
class Answer:
    hits: tuple[Hit, ...]
    tokens: int
    error: str | None = None  # the error code of a failed call
    reported_tokens: int | None = None  # the tool's own estimate, when it gives one (context)
    seconds: float = 0.0


def estimate_tokens(structured: Any) -> int:
    return math.ceil(len(to_json(structured).encode("utf-8")) / 4)


def concept_rank(hits: Sequence[Hit], concept_id: str) -> int | None:
    """1-based rank of the first hit on the concept, or None."""
    for rank, hit in enumerate(hits, 1):
        if hit.concept_id == concept_id:
            return rank
    return None


def section_rank(hits: Sequence[Hit], concept_id: str, line: int) -> int | None:
    """1-based rank of the first hit on the concept whose line range holds ``line``, or None.
    A hit without a line range (a whole concept) never counts here."""
    for rank, hit in enumerate(hits, 1):
        if (hit.concept_id == concept_id and hit.line_start is not None
                and hit.line_end is not None and hit.line_start <= line <= hit.line_end):
            return rank
    return None


def recall_at(ranks: Sequence[int | None], k: int) -> float:
    return sum(1 for r in ranks if r is not None and r <= k) / len(ranks) if ranks else 0.0


def found_rate(ranks: Sequence[int | None]) -> float:
    return sum(1 for r in ranks if r is not None) / len(ranks) if ranks else 0.0


def mean_reciprocal_rank(ranks: Sequence[int | None]) -> float:
    return sum(1 / r for r in ranks if r is not None) / len(ranks) if ranks else 0.0


def percentile(values: Sequence[int], fraction: float) -> int | None:
    """Nearest-rank percentile (``fraction`` 0.9 → p90); None without values."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]


def hits_of_search_concepts(result: dict[str, Any]) -> tuple[Hit, ...]:
    return tuple(Hit(h["concept"]["id"]) for h in result["hits"])


def hits_of_search_sections(result: dict[str, Any]) -> tuple[Hit, ...]:
    return tuple(Hit(h["concept_id"], h["line_start"], h["line_end"]) for h in result["hits"])


def hits_of_search_semantic(result: dict[str, Any]) -> tuple[Hit, ...]:
    # matched_seeds keeps the order of the vector hits (best first), less unresolved IDs.
    return tuple(Hit(concept_id) for concept_id in result["matched_seeds"])


def hits_of_context(result: dict[str, Any]) -> tuple[Hit, ...]:
    return tuple(Hit(item["parent_id"], item.get("line_start"), item.get("line_end"))
                 for item in result["items"])


# --------------------------------------------------------------------------------------------
# The naive baseline: ripgrep


def rg_command(rg: str, query_words: Sequence[str]) -> list[str]:
    """Every query word as a caseless fixed-string pattern; matching lines counted per file.
    Run in the corpus root; the ``.`` keeps rg from reading stdin."""
    command = [rg, "-F", "-i", "-c", "--glob", "*.md"]
    for word in query_words:
        command += ["-e", word]
    return [*command, "."]


def rg_ranking(stdout: str, concept_of_path: dict[str, str]) -> tuple[Hit, ...]:
    """Files of ``path:count`` lines, most matching lines first (ties by path), as concepts.
    A file that is no concept (index.md, log.md, an unparseable file) is dropped."""
    counted = []
    for line in stdout.splitlines():
        path, sep, count = line.rpartition(":")
        if not sep or not count.isdigit():
            continue
        path = path.removeprefix("./")
        concept_id = concept_of_path.get(path)
        if concept_id is not None:
            counted.append((-int(count), path, concept_id))
    counted.sort()
    return tuple(Hit(concept_id) for _, _, concept_id in counted)


# --------------------------------------------------------------------------------------------
# Systems


@dataclass(frozen=True)
class System:
    name: str
    ask: Callable[[Query], Answer] | None
    skip_reason: str | None = None
    line_ranges: bool = False  # its hits carry line ranges: section-level ranks make sense
    whole_answer: bool = False  # ranks over the whole answer (a pack), not the top 10
    # Called just before the system's turn: None when it can answer, else why its row is
    # skipped (the embedding wait happens here, after the cheap systems have run).
    prepare: Callable[[], str | None] | None = None
    # A subprocess (rg): its queries run in a background thread from the start, on the core
    # the in-process tools leave idle; a real agent would not run the two at once, but the
    # ranks are the same and the run is shorter.
    concurrent: bool = False


def _dispatched(dispatcher: Dispatcher, tool: str, arguments: dict[str, Any],
                hits: Callable[[dict[str, Any]], tuple[Hit, ...]]) -> Answer:
    start = time.perf_counter()
    outcome: Outcome = dispatcher.call(tool, arguments)
    seconds = time.perf_counter() - start
    if outcome.is_error:
        return Answer((), estimate_tokens(outcome.structured), outcome.structured["code"],
                      seconds=seconds)
    result = outcome.structured
    reported = result.get("tokens") if isinstance(result.get("tokens"), int) else None
    return Answer(hits(result), estimate_tokens(result), reported_tokens=reported,
                  seconds=seconds)


def input_properties(dispatcher: Dispatcher, tool: str) -> set[str]:
    """The argument names of a tool's input contract: the file the dispatcher checks calls
    against (``contracts/<tool>.input.schema.json`` of the code in use)."""
    return set(dispatcher.contracts.input_schema(tool).get("properties", {}))


def registered_tools() -> tuple[str, ...]:
    from bundle_mcp.tools import TOOL_MODULES

    return TOOL_MODULES


@dataclass(frozen=True)
class Corpus:
    """One served bundle: its dispatcher, snapshot and path → concept ID map."""

    name: str
    root: Path
    dispatcher: Dispatcher
    snapshot: Snapshot
    concept_of_path: dict[str, str]


EMBEDDING_SYSTEMS = frozenset({"search_semantic", "search_sections hybrid", "context hybrid"})
SYSTEM_NAMES = ("search_concepts", "search_sections", "rg (naive)", "search_semantic",
                "search_sections hybrid", "context", "context hybrid")


def systems(corpus: Corpus, options: Options, semantic: SemanticIndex | None) -> list[System]:
    """Every system in table order; those left out by ``--system`` are skipped, saying so."""
    chosen = _all_systems(corpus, options, semantic)
    if not options.only:
        return chosen
    return [s if s.name in options.only else System(s.name, None, "not selected (--system)")
            for s in chosen]


def _all_systems(corpus: Corpus, options: Options,
                 semantic: SemanticIndex | None) -> list[System]:
    d = corpus.dispatcher
    out = [
        System("search_concepts", lambda q: _dispatched(
            d, "search_concepts", {"query": q.text, "limit": TOP}, hits_of_search_concepts)),
        System("search_sections", lambda q: _dispatched(
            d, "search_sections", {"query": q.text, "limit": TOP}, hits_of_search_sections),
            line_ranges=True),
    ]
    rg = shutil.which(options.rg)
    if rg is None:
        out.append(System("rg (naive)", None, f"ripgrep not found ({options.rg!r} is not on "
                          "PATH; apt-get install -y ripgrep)"))
    else:
        out.append(System("rg (naive)", lambda q: _rg_answer(rg, corpus, q), concurrent=True))
    # The embedding rows wait for every vector first (a hybrid row without them would measure
    # its lexical fallback); without embeddings they are skipped with the reason.
    def embeddings_ready() -> str | None:
        return _semantic_reason(corpus, options, semantic)

    out.append(System("search_semantic", lambda q: _dispatched(
        d, "search_semantic", {"query": q.text, "top_k": TOP}, hits_of_search_semantic),
        prepare=embeddings_ready))
    if "hybrid" in input_properties(d, "search_sections"):
        out.append(System("search_sections hybrid", lambda q: _dispatched(
            d, "search_sections", {"query": q.text, "limit": TOP, "hybrid": True},
            hits_of_search_sections), line_ranges=True, prepare=embeddings_ready))
    else:
        out.append(System("search_sections hybrid", None, "contracts/search_sections.input"
                          ".schema.json has no hybrid property"))
    if "context" in registered_tools():
        out.append(System("context", lambda q: _dispatched(
            d, "context", {"question": q.text}, hits_of_context),
            line_ranges=True, whole_answer=True))
        # The same pack ranked with embeddings too, when context offers it.
        if "hybrid" in input_properties(d, "context"):
            out.append(System("context hybrid", lambda q: _dispatched(
                d, "context", {"question": q.text, "hybrid": True}, hits_of_context),
                line_ranges=True, whole_answer=True, prepare=embeddings_ready))
        else:
            out.append(System("context hybrid", None, "the context input contract has no "
                              "hybrid property"))
    else:
        reason = "no context tool in bundle_mcp.tools.TOOL_MODULES"
        out.append(System("context", None, reason))
        out.append(System("context hybrid", None, reason))
    return out


def _rg_answer(rg: str, corpus: Corpus, query: Query) -> Answer:
    start = time.perf_counter()
    done = subprocess.run(rg_command(rg, query.words), cwd=corpus.root, capture_output=True,
                          text=True, encoding="utf-8", errors="replace", check=False)
    seconds = time.perf_counter() - start
    if done.returncode not in (0, 1):  # 1: nothing matched
        return Answer((), 0, f"rg exit {done.returncode}", seconds=seconds)
    tokens = math.ceil(len(done.stdout.encode("utf-8")) / 4)
    return Answer(rg_ranking(done.stdout, corpus.concept_of_path), tokens, seconds=seconds)


def _semantic_reason(corpus: Corpus, options: Options,
                     semantic: SemanticIndex | None) -> str | None:
    """None when search_semantic can answer on this corpus, else why its row is skipped.
    Waits (up to --semantic-wait) until every concept has a vector."""
    if options.no_semantic:
        return "disabled by --no-semantic"
    if semantic is None:
        return "the semantic extra is not installed (pip install 'bundle-mcp[semantic]')"
    from bundle_mcp.semantic import READY, UNAVAILABLE

    start = time.monotonic()
    status = semantic.status(corpus.snapshot)
    waited = status != READY
    if waited:
        log(f"{corpus.name}: waiting for embeddings of {len(corpus.snapshot.concepts):,} "
            f"concepts (at most {options.semantic_wait:.0f} s; vectors are cached for later "
            "runs)")
        status = semantic.wait(corpus.snapshot, options.semantic_wait)
    if status == UNAVAILABLE:
        return "embedding index unavailable: the model is missing or failed to load"
    if status != READY:
        return f"embeddings still {status} after {options.semantic_wait:.0f} s (--semantic-wait)"
    probe = corpus.dispatcher.call("search_semantic", {"query": "probe", "top_k": 1})
    embedding_status = probe.structured.get("embedding_status")
    if probe.is_error or embedding_status != READY:
        return f"search_semantic did not report embedding_status ready ({embedding_status})"
    if waited:
        log(f"{corpus.name}: embeddings ready after {time.monotonic() - start:.0f} s")
    return None


# --------------------------------------------------------------------------------------------
# One corpus


@dataclass(frozen=True)
class Options:
    queries: int = DEFAULT_QUERIES
    seed: int = DEFAULT_SEED
    rg: str = "rg"
    no_semantic: bool = False
    semantic_wait: float = 1200.0
    torch_threads: int = 1  # 0: torch's own default
    only: tuple[str, ...] = ()  # run only these systems (--system); empty: all
    questions: bool = True  # also ask the hand-written questions (bench/questions/)
    questions_only: bool = False  # ask only them (--questions-only)
    questions_dir: str = str(question_set.QUESTIONS_DIR)


@dataclass(frozen=True)
class Row:
    system: str
    kind: str  # CONCEPT or SECTION: which queries
    level: str  # CONCEPT or SECTION: what counts as found
    queries: int
    errors: int
    recall_1: float
    recall_5: float
    found: float  # in the top 10, or anywhere in a pack
    mrr: float
    median_tokens: float | None
    p90_tokens: int | None
    median_reported_tokens: float | None
    median_ms: float | None


def row_of(system: System, kind: str, level: str, queries: Sequence[Query],
           answers: Sequence[Answer]) -> Row:
    ranks = []
    for query, answer in zip(queries, answers, strict=True):
        hits = answer.hits if system.whole_answer else answer.hits[:TOP]
        if level == SECTION:
            assert query.line_start is not None
            ranks.append(section_rank(hits, query.concept_id, query.line_start))
        else:
            ranks.append(concept_rank(hits, query.concept_id))
    # Failed calls count as misses; their (tiny) envelopes are left out of the token figures.
    tokens = [a.tokens for a in answers if a.error is None]
    reported = [a.reported_tokens for a in answers if a.reported_tokens is not None]
    return Row(
        system=system.name, kind=kind, level=level, queries=len(queries),
        errors=sum(1 for a in answers if a.error is not None),
        recall_1=recall_at(ranks, 1), recall_5=recall_at(ranks, 5), found=found_rate(ranks),
        mrr=mean_reciprocal_rank(ranks),
        median_tokens=statistics.median(tokens) if tokens else None,
        p90_tokens=percentile(tokens, 0.9),
        median_reported_tokens=statistics.median(reported) if reported else None,
        median_ms=statistics.median(a.seconds for a in answers) * 1000 if answers else None,
    )


def measure(corpus: Corpus, options: Options, semantic: SemanticIndex | None) -> dict[str, Any]:
    concepts = outlines(corpus.snapshot)
    candidates = {CONCEPT: concept_queries(concepts), SECTION: section_queries(concepts)}
    picked = {kind: sample(found, options.queries, options.seed)
              for kind, found in candidates.items()}
    log(f"{corpus.name}: {len(concepts):,} concepts; concept queries "
        f"{len(picked[CONCEPT])} of {len(candidates[CONCEPT]):,}, section queries "
        f"{len(picked[SECTION])} of {len(candidates[SECTION]):,}")
    if semantic is not None and (not options.only or set(options.only) & EMBEDDING_SYSTEMS):
        semantic.ensure(corpus.snapshot)  # embeddings fill in the background meanwhile
    rows: list[Row] = []
    skipped: dict[str, str] = {}
    details: dict[str, list[dict[str, Any]]] = {
        kind: [{"kind": q.kind, "query": q.text, "concept_id": q.concept_id,
                "line_start": q.line_start, "ranks": {}} for q in picked[kind]]
        for kind in (CONCEPT, SECTION)
    }
    with ThreadPoolExecutor(max_workers=1) as pool:
        _run_systems(corpus, systems(corpus, options, semantic), picked, details, rows,
                     skipped, pool)
    return {
        "name": corpus.name,
        "concepts": len(concepts),
        "broken_files": len(corpus.snapshot.broken),
        "candidates": {kind: len(found) for kind, found in candidates.items()},
        "sampled": {kind: len(found) for kind, found in picked.items()},
        "rows": [asdict(row) for row in rows],
        "skipped_systems": skipped,
        "queries": details[CONCEPT] + details[SECTION],
    }


def _ask_all(ask: Callable[[Query], Answer], queries: Sequence[Query]) -> list[Answer]:
    return [ask(q) for q in queries]


def _run_systems(corpus: Corpus, all_systems: Sequence[System],
                 picked: dict[str, list[Query]], details: dict[str, list[dict[str, Any]]],
                 rows: list[Row], skipped: dict[str, str], pool: ThreadPoolExecutor) -> None:
    """Ask every system every picked query; fill ``rows``, ``skipped`` and each query's
    ``ranks`` in ``details``."""
    early: dict[tuple[str, str], Future[list[Answer]]] = {
        (system.name, kind): pool.submit(_ask_all, system.ask, picked[kind])
        for system in all_systems
        if system.concurrent and system.ask is not None and system.skip_reason is None
        for kind in (CONCEPT, SECTION)
    }
    for system in all_systems:
        reason = system.skip_reason
        if reason is None and system.prepare is not None:
            reason = system.prepare()
        if reason is not None or system.ask is None:
            skipped[system.name] = reason or "not available"
            log(f"{corpus.name}: {system.name} skipped: {skipped[system.name]}")
            continue
        start = time.monotonic()
        for kind in (CONCEPT, SECTION):
            queries = picked[kind]
            if not queries:
                continue
            future = early.get((system.name, kind))
            answers = future.result() if future is not None else _ask_all(system.ask, queries)
            levels = [CONCEPT] + ([SECTION] if kind == SECTION and system.line_ranges else [])
            for level in levels:
                rows.append(row_of(system, kind, level, queries, answers))
            for q, a, detail in zip(queries, answers, details[kind], strict=True):
                hits = a.hits if system.whole_answer else a.hits[:TOP]
                detail["ranks"][system.name] = {
                    "concept": concept_rank(hits, q.concept_id),
                    "section": (section_rank(hits, q.concept_id, q.line_start)
                                if q.line_start is not None and system.line_ranges else None),
                    "tokens": a.tokens, "error": a.error,
                }
        log(f"{corpus.name}: {system.name}: {time.monotonic() - start:.1f} s"
            + (" (waited for; it ran in the background)" if (system.name, CONCEPT) in early
               else ""))


def serve(name: str, root: Path, semantic: SemanticIndex | None) -> Corpus:
    """One dispatcher over the bundle (unparseable files skipped, as ``--skip-unparseable``),
    with the run's embedding index (or None)."""
    bundle = str(root.resolve())
    dispatcher = Dispatcher(ServeConfig(bundles=(bundle,), skip_unparseable=True),
                            semantic=semantic)
    snapshot = dispatcher.served_snapshot(bundle, CancelToken())
    return Corpus(name, Path(bundle), dispatcher, snapshot,
                  {doc.path: cid for cid, doc in snapshot.concepts.items()})


# --------------------------------------------------------------------------------------------
# The generated bundle

_ONSETS = ("b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br", "st",
           "tr", "kl", "gr", "sn")
_VOWELS = ("a", "e", "i", "o", "u", "ai", "ou")
_CODAS = ("", "", "", "n", "r", "s", "l", "x")
GENERIC_HEADINGS = ("Overview", "Parameters", "Remarks", "Examples", "Return value",
                    "Requirements", "See also", "Notes")
GENERATED_TYPES = ("Guide", "Reference", "Tutorial", "Concept", "Function", "Class")
GENERATED_FOLDERS = ("core", "api", "guides", "tools", "formats", "runtime", "network",
                     "storage", "security", "reference")
SHARED_DESCRIPTIONS = ("Reference page generated from the source tree.",
                       "See the overview for details.")


@dataclass(frozen=True)
class _Vocabulary:
    words: tuple[str, ...]  # most frequent first
    cum_weights: tuple[float, ...]  # Zipf: weight 1 / rank

    def draw(self, rng: random.Random, n: int, low: int = 0, high: int | None = None
             ) -> list[str]:
        """``n`` words by Zipf frequency, from ranks [low, high)."""
        high = len(self.words) if high is None else high
        base = self.cum_weights[low - 1] if low else 0.0
        picks = rng.choices(range(low, high), cum_weights=[
            w - base for w in self.cum_weights[low:high]], k=n)
        return [self.words[i] for i in picks]


def _vocabulary(rng: random.Random, size: int) -> _Vocabulary:
    found: dict[str, None] = {}
    while len(found) < size:
        word = "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS)
                       for _ in range(rng.choice((2, 2, 3))))
        found.setdefault(word, None)
    total, cum = 0.0, []
    for rank in range(1, size + 1):
        total += 1 / rank
        cum.append(total)
    return _Vocabulary(tuple(found), tuple(cum))


def _sentence(rng: random.Random, vocab: _Vocabulary, must: Sequence[str]) -> str:
    chosen = vocab.draw(rng, rng.randint(8, 16))
    for word in must:
        chosen.insert(rng.randrange(len(chosen) + 1), word)
    text = " ".join(chosen)
    return text[0].upper() + text[1:] + "."


def generate_bundle(root: Path, concepts: int = GENERATED_CONCEPTS,
                    seed: int = GENERATED_SEED) -> int:
    """Write a deterministic docs-like bundle: families of concepts that share words (so a
    word never names one page), Zipf-distributed pseudo-words, generic headings such as
    "Parameters" on most pages, headings that repeat title words, a few shared descriptions and
    a few concepts without one, and links between concepts. Returns the number of concepts."""
    rng = random.Random(seed)
    vocab = _vocabulary(rng, 3000)
    family_size = 5
    families = []
    for _ in range(max(1, concepts // family_size)):
        families.append((vocab.draw(rng, 1, 200, 1500)[0], vocab.draw(rng, 8, 20, 400)))
    specs = []
    used_paths: set[str] = set()
    for n in range(concepts):
        stem, heading_pool = families[n % len(families)]
        title_words = [stem, *vocab.draw(rng, rng.randint(1, 2), 50, 2500)]
        folder = GENERATED_FOLDERS[n % len(GENERATED_FOLDERS)]
        slug = "-".join(title_words)
        path = f"{folder}/{slug}.md"
        while path in used_paths:
            slug += f"-{n}"
            path = f"{folder}/{slug}.md"
        used_paths.add(path)
        specs.append((path, title_words, stem, heading_pool))
    for n, (path, title_words, stem, heading_pool) in enumerate(specs):
        title = " ".join(title_words).title()
        roll = rng.random()
        if roll < 0.04:
            description = None
        elif roll < 0.07:
            description = rng.choice(SHARED_DESCRIPTIONS)
        else:
            description = _sentence(rng, vocab, [stem, *vocab.draw(rng, 1, 0, 300)])
        tags = sorted(set(vocab.draw(rng, rng.randint(1, 3), 0, 40)))
        lines = ["---", f"type: {rng.choice(GENERATED_TYPES)}", f"title: {json.dumps(title)}"]
        if description is not None:
            lines.append(f"description: {json.dumps(description)}")
        lines += [f"tags: {json.dumps(tags)}", "---", f"# {title}", ""]
        lines.append(" ".join(_sentence(rng, vocab, [stem]) for _ in range(3)))
        folder = path.split("/")[0]
        for _ in range(rng.randint(4, 7)):
            if rng.random() < 0.4:
                heading = rng.choice(GENERIC_HEADINGS)
                heading_words: list[str] = []
            else:
                heading_words = [rng.choice(heading_pool),
                                 *vocab.draw(rng, rng.randint(1, 2), 10, 800)]
                if rng.random() < 0.3:
                    heading_words.insert(rng.randrange(len(heading_words) + 1),
                                         rng.choice(title_words))
                heading = " ".join(heading_words).capitalize()
            level = "###" if rng.random() < 0.2 else "##"
            lines += ["", f"{level} {heading}", ""]
            for _ in range(rng.randint(1, 3)):
                sentences = []
                for _ in range(rng.randint(2, 5)):
                    must = [w for w in heading_words if rng.random() < 0.5]
                    if rng.random() < 0.3:
                        must.append(stem)
                    sentence = _sentence(rng, vocab, must)
                    if rng.random() < 0.15:
                        # Half the links go to a page of the same family (n mod families).
                        other = (rng.randrange(len(specs)) if rng.random() < 0.5 else
                                 (n + len(families) * rng.randint(1, family_size - 1))
                                 % len(specs))
                        other_path, other_words, _, _ = specs[other]
                        other_folder, other_file = other_path.split("/")
                        target = (other_file if other_folder == folder
                                  else f"../{other_path}")
                        sentence += f" See [{' '.join(other_words).title()}]({target})."
                    sentences.append(sentence)
                lines += [" ".join(sentences), ""]
        file = root / path
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text("\n".join(lines).rstrip("\n") + "\n", encoding="utf-8")
    (root / "index.md").write_text(
        '---\nokf_version: "0.2"\ntitle: Generated quality bundle\n---\n# Generated quality '
        "bundle\n\n" + "".join(f"- [{f}]({f}/)\n" for f in GENERATED_FOLDERS),
        encoding="utf-8")
    return concepts


# --------------------------------------------------------------------------------------------
# Hand-written questions (bench/questions/<corpus>.jsonl, bench/question_set.py)

QUESTION = "question"
BM25_FILES = "BM25 over files"
QUESTION_SYSTEMS = ("context", "context hybrid", "search_semantic", BM25_FILES)
ALL = "all"
CONTEXT_FIRST_TARGET = 0.75  # issue 26, "Done means", on the report half of every corpus
CONTEXT_PACK_TARGET = 0.95
CONTEXT_OVER_BM25_POINTS = 15.0


def question_rank(hits: Sequence[Hit], targets: frozenset[str]) -> int | None:
    """1-based rank of the first hit whose concept is an answer page (or its copy), or None."""
    for rank, hit in enumerate(hits, 1):
        if hit.concept_id in targets:
            return rank
    return None


def mrr_at(ranks: Sequence[int | None], k: int) -> float:
    return sum(1 / r for r in ranks if r is not None and r <= k) / len(ranks) if ranks else 0.0


def _bm25_system(corpus: Corpus) -> System:
    """Whole-file Okapi BM25 over the served concepts' files, built at its turn."""
    built: dict[str, question_set.FileBM25] = {}

    def prepare() -> str | None:
        start = time.monotonic()
        built["index"] = question_set.FileBM25(
            [(cid, doc.text) for cid, doc in sorted(corpus.snapshot.concepts.items())])
        log(f"{corpus.name}: {BM25_FILES}: indexed {len(corpus.snapshot.concepts):,} files in "
            f"{time.monotonic() - start:.1f} s")
        return None

    def ask(query: Query) -> Answer:
        start = time.perf_counter()
        ranked = built["index"].rank(query.text, TOP)
        return Answer(tuple(Hit(cid) for cid in ranked), 0,
                      seconds=time.perf_counter() - start)

    return System(BM25_FILES, ask, prepare=prepare)


def question_systems(corpus: Corpus, options: Options,
                     semantic: SemanticIndex | None) -> list[System]:
    """The question table's rows: context at its default budget, the embedding rows when the
    semantic extra can answer, and the BM25-over-files baseline."""
    by_name = {s.name: s for s in _all_systems(corpus, options, semantic)}
    return [*(by_name[name] for name in QUESTION_SYSTEMS[:3]), _bm25_system(corpus)]


def measure_questions(corpus: Corpus, options: Options,
                      semantic: SemanticIndex | None) -> dict[str, Any] | None:
    """Ask every hand-written question of this corpus; None when it has no question file."""
    asked = question_set.load_questions(corpus.name, Path(options.questions_dir))
    if not asked:
        return None
    missing: list[str] = []
    targets: list[frozenset[str]] = []
    for q in asked:
        found = set()
        for path in (*q.answers, *q.copies):
            concept_id = corpus.concept_of_path.get(path)
            if concept_id is None:
                missing.append(f"{q.id}: {path}")
            else:
                found.add(concept_id)
        targets.append(frozenset(found))
    for line in missing:
        log(f"{corpus.name}: answer page not served as a concept: {line}")
    queries = [Query(QUESTION, q.question, tuple(words(q.question)), "") for q in asked]
    if semantic is not None and not options.no_semantic:
        semantic.ensure(corpus.snapshot)
    rows: list[dict[str, Any]] = []
    skipped: dict[str, str] = {}
    details = [{"id": q.id, "split": q.split, "difficulty": q.difficulty,
                "question": q.question, "ranks": {}} for q in asked]
    for system in question_systems(corpus, options, semantic):
        reason = system.skip_reason
        if reason is None and system.prepare is not None:
            reason = system.prepare()
        if reason is not None or system.ask is None:
            skipped[system.name] = reason or "not available"
            log(f"{corpus.name}: questions: {system.name} skipped: {skipped[system.name]}")
            continue
        start = time.monotonic()
        answers = [system.ask(query) for query in queries]
        log(f"{corpus.name}: questions: {system.name}: {time.monotonic() - start:.1f} s")
        ranks = []
        for answer, wanted, detail in zip(answers, targets, details, strict=True):
            hits = answer.hits if system.whole_answer else answer.hits[:TOP]
            rank = question_rank(hits, wanted)
            ranks.append(rank)
            detail["ranks"][system.name] = {"rank": rank, "tokens": answer.tokens,
                                            "error": answer.error}
        for split in (question_set.REPORT, question_set.TUNE):
            for difficulty in (question_set.EASY, question_set.HARD, ALL):
                picked = [n for n, q in enumerate(asked) if q.split == split
                          and difficulty in (ALL, q.difficulty)]
                rows.append(question_row(system, split, difficulty,
                                         [ranks[n] for n in picked],
                                         [answers[n] for n in picked]))
    return {"questions": len(asked), "missing_answers": missing, "rows": rows,
            "skipped_systems": skipped, "details": details}


def question_row(system: System, split: str, difficulty: str, ranks: Sequence[int | None],
                 answers: Sequence[Answer]) -> dict[str, Any]:
    tokens = [a.tokens for a in answers if a.error is None]
    return {
        "system": system.name, "split": split, "difficulty": difficulty,
        "questions": len(ranks), "errors": sum(1 for a in answers if a.error is not None),
        "hit_1": recall_at(ranks, 1), "hit_5": recall_at(ranks, 5), "mrr_10": mrr_at(ranks, 10),
        "found": found_rate(ranks), "whole_answer": system.whole_answer,
        "median_tokens": statistics.median(tokens) if tokens and system.whole_answer else None,
    }


def render_questions(name: str, measured: dict[str, Any]) -> str:
    lines = [
        f"### Questions: {name}",
        "",
        f"{measured['questions']} hand-written questions (bench/questions/{name}.jsonl); a hit "
        "is an answer page or its copy. `in answer`: anywhere in the pack for `context`, in "
        f"the top {TOP} for the others.",
        "",
        "| split | difficulty | questions | system | hit@1 | hit@5 | MRR@10 | in answer "
        "| median tokens |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    splits = (question_set.REPORT, question_set.TUNE)
    levels = (question_set.EASY, question_set.HARD, ALL)
    systems_order = [row["system"] for row in measured["rows"]]
    ordered = sorted(measured["rows"], key=lambda row: (
        splits.index(row["split"]), levels.index(row["difficulty"]),
        systems_order.index(row["system"])))
    for row in ordered:
        lines.append(
            f"| {row['split']} | {row['difficulty']} | {row['questions']} | {row['system']} "
            f"| {_pct(row['hit_1'])} | {_pct(row['hit_5'])} | {row['mrr_10']:.3f} "
            f"| {_pct(row['found'])} | {_num(row['median_tokens'])} |")
    for system, reason in measured["skipped_systems"].items():
        lines.append(f"| | | | {system} | skipped: {reason} | | | | |")
    if measured["missing_answers"]:
        lines += ["", "Answer pages not served as concepts: "
                  + ", ".join(measured["missing_answers"])]
    return "\n".join(lines) + "\n"


def question_targets(results: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Issue 26's bar on the report half (easy and hard together), per corpus."""
    out: list[dict[str, Any]] = []
    for result in results:
        measured = result.get("questions")
        if not measured:
            continue
        name = result["name"]
        rows = {row["system"]: row for row in measured["rows"]
                if row["split"] == question_set.REPORT and row["difficulty"] == ALL}
        context, bm25 = rows.get("context"), rows.get(BM25_FILES)
        why = measured["skipped_systems"].get("context", "not measured")
        if context is None:
            for label in ("context answer first ≥ 75%", "context answer in pack ≥ 95%"):
                out.append(_target(label, name, None, None, why))
        else:
            out.append(_target("context answer first ≥ 75%", name, _pct(context["hit_1"]),
                               context["hit_1"] >= CONTEXT_FIRST_TARGET))
            out.append(_target("context answer in pack ≥ 95%", name, _pct(context["found"]),
                               context["found"] >= CONTEXT_PACK_TARGET))
        label = "context hit@5 ≥ BM25 over files + 15 points"
        if context is None or bm25 is None:
            out.append(_target(label, name, None, None, why))
        else:
            ours, theirs = context["hit_5"] * 100, bm25["hit_5"] * 100
            out.append(_target(label, name, f"{ours:.1f}% vs {theirs:.1f}% ({ours - theirs:+.1f})",
                               ours - theirs >= CONTEXT_OVER_BM25_POINTS))
    return out


def questions_markdown(results: Sequence[dict[str, Any]], command: str) -> str:
    """The question tables and their targets as one Markdown document (bench/results/)."""
    lines = [
        "# Hand-written questions: retrieval figures",
        "",
        f"Measured {datetime.date.today().isoformat()} at commit {_git_commit() or 'unknown'}"
        f"{' (with uncommitted changes)' if _git_dirty() else ''} "
        f"with `{command}`. Figures depend on the code measured, not on the machine "
        "(no timing here).",
        "",
    ]
    for result in results:
        if result.get("questions"):
            lines.append(render_questions(result["name"], result["questions"]))
    lines.append(render_targets(question_targets(results)).replace(
        "### Targets", "### Targets (issue 26, report half)"))
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# Output


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _pct(value: float) -> str:
    return f"{value * 100:.1f}%"


def _num(value: float | None) -> str:
    return "—" if value is None else f"{value:,.0f}"


def render_corpus(result: dict[str, Any]) -> str:
    name = result["name"]
    if "skipped" in result:
        return f"### {name}\n\nskipped: {result['skipped']}\n"
    cand, samp = result["candidates"], result["sampled"]
    lines = [
        f"### {name}",
        "",
        f"{result['concepts']:,} concepts ({result['broken_files']} unparseable files skipped); "
        f"concept queries {samp[CONCEPT]} of {cand[CONCEPT]:,} candidates, section queries "
        f"{samp[SECTION]} of {cand[SECTION]:,}.",
        "",
        "| system | queries | found as | recall@1 | recall@5 | MRR | found | median tokens "
        "| p90 tokens | errors |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in result["rows"]:
        level = "concept" if row["level"] == CONCEPT else "section"
        lines.append(
            f"| {row['system']} | {row['queries']} {row['kind']} | {level} "
            f"| {_pct(row['recall_1'])} | {_pct(row['recall_5'])} | {row['mrr']:.3f} "
            f"| {_pct(row['found'])} | {_num(row['median_tokens'])} | {_num(row['p90_tokens'])} "
            f"| {row['errors']} |")
    for system, reason in result["skipped_systems"].items():
        lines.append(f"| {system} | skipped: {reason} | | | | | | | | |")
    return "\n".join(lines) + "\n"


def _pooled(result: dict[str, Any], system: str, level: str = CONCEPT
            ) -> tuple[list[int | None], list[int]] | None:
    """Ranks and tokens of one system over every query of a corpus (both kinds)."""
    ranks: list[int | None] = []
    tokens: list[int] = []
    seen = False
    for q in result["queries"]:
        got = q["ranks"].get(system)
        if got is None:
            continue
        seen = True
        ranks.append(got[level])
        if got["error"] is None:
            tokens.append(got["tokens"])
    return (ranks, tokens) if seen else None


def targets(results: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for result in results:
        name = result["name"]
        if "skipped" in result:
            continue
        context = _pooled(result, "context")
        reason = result["skipped_systems"].get("context", "no queries")
        if context is None:
            out.append(_target("context found in pack ≥ 90%", name, None, None, reason))
            out.append(_target("context median pack ≤ 4,000 tokens", name, None, None, reason))
        else:
            found = found_rate(context[0])
            out.append(_target("context found in pack ≥ 90%", name, _pct(found),
                               found >= CONTEXT_FOUND_TARGET))
            median = statistics.median(context[1]) if context[1] else None
            out.append(_target("context median pack ≤ 4,000 tokens", name, _num(median),
                               None if median is None else median <= CONTEXT_MEDIAN_TOKENS))
        sections, rg = _pooled(result, "search_sections"), _pooled(result, "rg (naive)")
        label = "search_sections recall@5 ≥ rg + 20 points"
        if sections is None or rg is None:
            why = result["skipped_systems"].get("rg (naive)", "no queries")
            out.append(_target(label, name, None, None, why))
        else:
            ours, theirs = recall_at(sections[0], 5) * 100, recall_at(rg[0], 5) * 100
            out.append(_target(label, name, f"{ours:.1f}% vs {theirs:.1f}% "
                               f"({ours - theirs:+.1f})", ours - theirs >= SECTIONS_OVER_RG_POINTS))
    return out


def _target(label: str, corpus: str, measured: str | None, met: bool | None,
            reason: str | None = None) -> dict[str, Any]:
    verdict = "not measured" if met is None else ("met" if met else "missed")
    return {"target": label, "corpus": corpus, "measured": measured, "verdict": verdict,
            "reason": reason if met is None else None}


def render_targets(rows: Sequence[dict[str, Any]]) -> str:
    lines = ["### Targets", "", "| target | corpus | measured | verdict |", "|---|---|---|---|"]
    for row in rows:
        measured = row["measured"] if row["measured"] is not None else f"— ({row['reason']})"
        lines.append(f"| {row['target']} | {row['corpus']} | {measured} | {row['verdict']} |")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------------
# Driver

def _semantic_index(options: Options) -> SemanticIndex | None:
    from bundle_mcp.semantic import MINILM

    if options.no_semantic or not MINILM.available():
        return None
    if options.torch_threads > 0:
        # Each query is one short sentence: with two intra-op threads on a busy two-core
        # machine an encode took 330 ms, with one 30 ms (2026-12-02). Ranks do not change.
        import torch

        torch.set_num_threads(options.torch_threads)
    return SemanticIndex.default()


def run(names: Sequence[str], options: Options, corpora_dir: Path,
        generated_concepts: int) -> list[dict[str, Any]]:
    results = []
    # One embedding index for the run, shared by every corpus's dispatcher (as in a server).
    semantic = _semantic_index(options)
    try:
        for name in names:
            start = time.monotonic()
            with tempfile.TemporaryDirectory(prefix="bench-quality-") as tmp:
                if name == GENERATED:
                    root = Path(tmp) / "bundle"
                    generate_bundle(root, generated_concepts)
                else:
                    root = corpora_dir / name
                    if not root.is_dir():
                        message = f"corpus {name} not found at {root}"
                        log(f"{name}: skipped: {message}")
                        results.append({"name": name, "skipped": message})
                        continue
                corpus = serve(name, root, semantic)
                log(f"{name}: loaded in {time.monotonic() - start:.1f} s")
                result = ({"name": name} if options.questions_only
                          else measure(corpus, options, semantic))
                if options.questions:
                    result["questions"] = measure_questions(corpus, options, semantic)
            result["seconds"] = round(time.monotonic() - start, 1)
            results.append(result)
    finally:
        if semantic is not None:
            semantic.close()
    return results


def _git_commit() -> str | None:
    done = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True,
                          text=True, check=False)
    return done.stdout.strip() or None


def _git_dirty() -> bool:
    done = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO,
                          capture_output=True, text=True, check=False)
    return bool(done.stdout.strip())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", action="append", choices=(*CORPORA, GENERATED),
                        help="run only this corpus (repeatable); default: all four")
    parser.add_argument("--queries", type=int, default=DEFAULT_QUERIES,
                        help="at most N queries per kind per corpus (default 200)")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="query sampling seed")
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    parser.add_argument("--corpora-dir", type=Path, default=DEFAULT_CORPORA,
                        help="folder holding the corpora (default ../shared/corpora)")
    parser.add_argument("--generated-concepts", type=int, default=GENERATED_CONCEPTS)
    parser.add_argument("--rg", default="rg", help="the ripgrep executable")
    parser.add_argument("--no-semantic", action="store_true", help="skip search_semantic")
    parser.add_argument("--semantic-wait", type=float, default=1200.0,
                        help="seconds to wait for a corpus's embeddings (default 1200)")
    parser.add_argument("--system", action="append", choices=SYSTEM_NAMES,
                        help="run only this system (repeatable); default: all")
    parser.add_argument("--torch-threads", type=int, default=1,
                        help="torch intra-op threads for the embedding model (default 1; "
                        "0 keeps torch's default)")
    questions = parser.add_mutually_exclusive_group()
    questions.add_argument("--questions-only", action="store_true",
                           help="ask only the hand-written questions (bench/questions/)")
    questions.add_argument("--no-questions", action="store_true",
                           help="leave the hand-written questions out")
    parser.add_argument("--questions-dir", type=Path, default=question_set.QUESTIONS_DIR,
                        help="folder of <corpus>.jsonl question files (default bench/questions)")
    parser.add_argument("--questions-md", type=Path, default=None,
                        help="write the question tables here (default: "
                        "bench/results/questions.md when all three corpora were asked)")
    args = parser.parse_args(argv)
    if args.queries < 1:
        parser.error("--queries wants 1 or more")
    options = Options(queries=args.queries, seed=args.seed, rg=args.rg,
                      no_semantic=args.no_semantic, semantic_wait=args.semantic_wait,
                      torch_threads=args.torch_threads, only=tuple(args.system or ()),
                      questions=not args.no_questions, questions_only=args.questions_only,
                      questions_dir=str(args.questions_dir))
    default_names = ([*CORPORA] if args.questions_only
                     else [GENERATED, "vcpkg-docs", "pnpm-docs", "cpp-docs"])
    names = args.corpus or default_names
    started = time.monotonic()
    results = run(names, options, args.corpora_dir, args.generated_concepts)
    goals = [] if args.questions_only else targets(results)
    if not args.questions_only:
        print(f"## Retrieval quality (top {TOP}; {TOKEN_NOTE})\n")
        for result in results:
            print(render_corpus(result))
        print(render_targets(goals))
        rg = shutil.which(args.rg)
        print(f"Naive baseline, run in the corpus root: "
              f"`{shlex.join(rg_command('rg', ['W1', 'W2']))}` (one -e per query word), files "
              f"ranked by matching lines then path{'' if rg else '; rg was not found'}.")
    if any(result.get("questions") for result in results):
        command = shlex.join(["python", "bench/quality.py", *(
            sys.argv[1:] if argv is None else argv)])
        text = questions_markdown(results, command)
        print("\n## Hand-written questions\n")
        print(text.split("\n", 2)[2])  # without the document's own title
        # A partial run never overwrites the committed figures of a full one.
        asked = {result["name"] for result in results if result.get("questions")}
        target = args.questions_md or (DEFAULT_QUESTIONS_MD if asked >= set(CORPORA) else None)
        if target is None:
            log(f"question tables not written to {DEFAULT_QUESTIONS_MD}: "
                "not every corpus was asked (--questions-md PATH writes them anyway)")
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
            log(f"wrote {target}")
    else:
        log("no hand-written questions were asked (no question file for these corpora)")
    if args.json is not None:
        args.json.write_text(json.dumps({
            "date": datetime.date.today().isoformat(),
            "commit": _git_commit(),
            "token_estimate": TOKEN_NOTE,
            "top": TOP,
            "options": {**asdict(options), "corpora": list(names),
                        "generated_concepts": args.generated_concepts},
            "seconds": round(time.monotonic() - started, 1),
            "corpora": list(results),
            "targets": goals,
            "question_targets": question_targets(results),
        }, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        log(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
