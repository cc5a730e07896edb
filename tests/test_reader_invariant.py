"""The readers invariant, as a property (docs/READERS.md).

For every read tool and its arguments, reader R's answer on a bundle is byte-identical to the
all-reading reader's answer on a copy of the bundle from which every file R may not read has
been deleted. Hypothesis generates bundles with links, relations, tags, sections, indexes and an
asset across several folders, and reader scopes from patterns of every kind; the test asks R on
the whole bundle, prunes the same folder in place (so the bundle path in every answer is the
same), and asks the all-reading reader, from a fresh dispatcher, the same questions. R may write
what it may read, and the reader of the pruned copy writes the same folders, so the previews
(which answer what R's apply would write) compare too.

Scopes are folders of the served bundle's root, so no call may name a folder inside it as a
bundle of its own: the questions include such calls (refused alike on both sides), and
``test_a_subfolder_can_never_be_a_scoped_readers_bundle`` checks that the configurations which
would accept them (``--allow-any-bundle``, a bundle inside another) refuse every scoped call.

The plain test runs 25 examples; the ``slow`` one 300, or 40 under ``HYPOTHESIS_PROFILE=ci``.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bundle_mcp.dispatch import Dispatcher, ServeConfig, to_json
from bundle_mcp.loader import load_bundle
from bundle_mcp.loader.views import reader_view
from bundle_mcp.okf.scopes import EVERYTHING, NOTHING, Access, FolderScope
from bundle_mcp.readers import ALL_READER, Reader
from bundle_mcp.semantic.embedder import EmbedderSource
from bundle_mcp.semantic.index import SemanticIndex
from bundle_mcp.semantic.vectors import Vector, unit

FOLDERS = ("", "finance", "finance/q3", "glossary", "teams/a/public", "teams/a/private",
           "teams/b/public", "shared")
NAMES = ("alpha", "beta", "gamma", "delta", "omega")
TYPES = ("Metric", "Table", "Glossary Term")
TAGS = ("kpi", "core", "pii")
WORDS = ("revenue", "margin", "roast", "ledger", "forecast", "cohort", "latency")
PATTERNS = ("finance", "finance/q3", "glossary", "teams/*/public", "teams/a", "/", "**/q3",
            "shared", "**")
AS_OF = "2026-12-01"
# The long run: 300 examples, bounded to 40 under HYPOTHESIS_PROFILE=ci (the repository's
# convention: slow tests run in CI too, with fewer examples).
LONG_EXAMPLES = 40 if os.environ.get("HYPOTHESIS_PROFILE") == "ci" else 300
DIM = 16


class _HashedWords:
    """A deterministic stand-in for the embedding model: words hashed into a few dimensions."""

    def encode(self, texts: Sequence[str]) -> list[Vector | None]:
        out: list[Vector | None] = []
        for text in texts:
            values = [0.0] * DIM
            for word in text.lower().split():
                values[hashlib.sha256(word.encode()).digest()[0] % DIM] += 1.0
            out.append(unit(values) if any(values) else None)
        return out


def _semantic() -> SemanticIndex:
    model = _HashedWords()
    source = EmbedderSource(model_key="test-hashed-words", dimension=DIM, max_chars=2000,
                            available=lambda: True, load=lambda: model)
    return SemanticIndex(source, None, wait_seconds=30.0)


# ------------------------------------------------------------------------------ bundles


@st.composite
def bundles(draw: st.DrawFn) -> dict[str, str]:
    """Bundle-relative path → file text."""
    paths = draw(st.lists(
        st.tuples(st.sampled_from(FOLDERS), st.sampled_from(NAMES)).map(
            lambda fn: posixpath.join(fn[0], fn[1] + ".md")),
        min_size=2, max_size=9, unique=True))
    ids = [p[:-3] for p in paths]
    files: dict[str, str] = {}
    for path in paths:
        folder = posixpath.dirname(path)
        others = [i for i in ids if i + ".md" != path]
        links = draw(st.lists(st.sampled_from([*others, "missing/nowhere"]), max_size=3))
        related = draw(st.lists(st.sampled_from(others), max_size=2, unique=True)) if others else []
        tags = draw(st.lists(st.sampled_from(TAGS), max_size=2, unique=True))
        words = draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=4))
        status = draw(st.sampled_from([None, "stable", "draft", "deprecated"]))
        stale = draw(st.sampled_from([None, "2026-06-01", "2027-06-01"]))
        name = posixpath.basename(path)[:-3]
        fm = [f"type: {draw(st.sampled_from(TYPES))}",
              f"title: {name.title()} of {folder or 'the root'}",
              f"description: {' '.join(words)} for {name}"]
        if tags:
            fm.append(f"tags: [{', '.join(tags)}]")
        if status:
            fm.append(f"status: {status}")
        if stale:
            fm.append(f"stale_after: {stale}")
        if related:
            fm.append("relations:\n  depends_on:\n"
                      + "".join(f"    - target: {t}\n" for t in related).rstrip("\n"))
        body = [f"# {name.title()}", "", " ".join(words) + ".", ""]
        for k, target in enumerate(links):
            rel = posixpath.relpath(target + ".md", folder or ".")
            body += [f"## Part {k} {words[k % len(words)]}", "",
                     f"See [{target}]({rel}) about {words[-1]}.", ""]
        if draw(st.booleans()) and folder:
            body += ["The [data](data.csv) behind it.", ""]
            files[posixpath.join(folder, "data.csv")] = "a,b\n1,2\n"
        files[path] = "---\n" + "\n".join(fm) + "\n---\n" + "\n".join(body)
    if draw(st.booleans()):  # an Attested Computation whose SQL file may sit in another folder
        home, sql_folder = draw(st.sampled_from(FOLDERS)), draw(st.sampled_from(FOLDERS))
        sql = posixpath.join(sql_folder, "margin.sql")
        calc = posixpath.join(home, "margin-calc.md")
        if calc not in files:
            files[sql] = "SELECT sum(revenue - cost) FROM ledger WHERE day >= :start\n"
            files[calc] = (
                "---\ntype: Attested Computation\ntitle: Margin calculation\nruntime: duckdb\n"
                f"computation: {posixpath.relpath(sql, home or '.')}\n"
                "parameters:\n  - { name: start, type: date, required: true }\n"
                "executor:\n  receipt: [run_id, executed_sql, result]\n---\n"
                "# Computation\n\nThe query lives in its own file.\n")
            ids.append(calc[:-3])
    if draw(st.booleans()):  # a root index listing every concept
        files["index.md"] = "# Index\n\n" + "".join(f"- [{i}]({i}.md)\n" for i in ids)
    for folder in sorted({posixpath.dirname(p) for p in paths} - {""}):
        if draw(st.booleans()):  # a folder index listing its own concepts
            own = [i for i in ids if posixpath.dirname(i) == folder]
            files[f"{folder}/index.md"] = "# Folder\n\n" + "".join(
                f"- [{posixpath.basename(i)}]({posixpath.basename(i)}.md)\n" for i in own)
    return files


scopes = st.lists(st.sampled_from(PATTERNS), min_size=1, max_size=3, unique=True).map(
    lambda ps: FolderScope.of(ps))


def _write(root: Path, files: dict[str, str]) -> None:
    shutil.rmtree(root, ignore_errors=True)
    for path, text in files.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")


def _prune(root: Path, scope: FolderScope) -> None:
    """Delete, on disk, what the reader may not read: every file whose folder is out of scope,
    then (deepest first) every folder out of scope left empty. Done from the disk alone, not
    from the view under test."""
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            rel = os.path.relpath(os.path.join(dirpath, name), root).replace(os.sep, "/")
            if not scope.reads_file(rel):
                os.unlink(os.path.join(dirpath, name))
    for dirpath, _dirs, _names in sorted(os.walk(root), key=lambda w: -len(w[0])):
        rel = os.path.relpath(dirpath, root).replace(os.sep, "/")
        if rel != "." and not scope.reads_folder(rel) and not os.listdir(dirpath):
            os.rmdir(dirpath)


# ------------------------------------------------------------------------------ questions


def questions(files: dict[str, str]) -> list[tuple[str, dict[str, Any]]]:
    """Calls of every read tool, naming concepts R may and may not read, and missing ones."""
    ids = sorted(p[:-3] for p in files if p.endswith(".md") and not p.endswith("index.md"))
    some = [*ids[:3], "missing/nowhere"]
    first, last = ids[0], ids[-1]
    calls: list[tuple[str, dict[str, Any]]] = [
        ("list_concepts", {"as_of": AS_OF}),
        ("bundle_summary", {"as_of": AS_OF}),
        ("validate_bundle", {"check_links": True, "check_orphans": True, "as_of": AS_OF}),
        ("validate_bundle", {"strict": True, "target_version": "0.2"}),
        ("get_semantic_graph", {"as_of": AS_OF}),
        ("visualize_graph", {}),
        ("visualize_graph", {"seed_ids": [first], "depth": 2}),
        ("search_concepts", {"query": "revenue margin", "limit": 5}),
        ("search_concepts", {"query": "alpha", "tags": ["kpi"], "as_of": AS_OF,
                             "exclude_stale": True}),
        ("search_sections", {"query": "roast ledger"}),
        ("search_sections", {"query": "forecast", "hybrid": True}),
        ("context", {"question": "what is the revenue margin forecast?", "max_tokens": 600}),
        ("context", {"question": "cohort latency", "hybrid": True, "as_of": AS_OF}),
        ("search_semantic", {"query": "revenue ledger", "top_k": 4}),
        ("search_semantic", {"query": "roast", "seed_ids": [first], "depth": 1}),
        ("query_subgraph", {"seed_ids": some, "depth": 2}),
        ("expand_neighbors", {"entity_ids": some, "depth": 2, "include_incoming": True}),
        ("find_path", {"from_id": first, "to_id": last, "include_incoming": True}),
        ("preview_v02_migration", {"timestamp_policy": "preserve", "citation_mappings": []}),
    ]
    for concept_id in [*ids, "missing/nowhere"]:
        calls += [
            ("read_concept", {"concept_id": concept_id}),
            ("fetch_slice", {"entity_id": concept_id}),
            ("get_neighbors", {"concept_id": concept_id, "direction": "both"}),
            ("get_computation", {"concept_id": concept_id}),
            ("check_receipt", {"concept_id": concept_id, "parameters": {}, "receipt": {},
                               "displayed_value": 1, "as_of": AS_OF}),
            ("preview_concept_patch", {"actor": "test", "operations": [
                {"kind": "set_lifecycle", "concept_id": concept_id,
                 "lifecycle": {"status": "stable", "stale_after": "2027-01-01"}}]}),
            ("preview_temporal_upgrade", {"id": concept_id, "actor": "test"}),
            ("preview_bundle_edit", {"operations": [
                {"op": "rename", "concept_id": concept_id, "new_id": "moved/renamed"},
                {"op": "delete", "concept_id": "moved/renamed", "inbound": "unlink"},
                {"op": "append_log", "folder": "", "date": "2026-12-03", "entry": "edited"}]}),
        ]
    for folder in ("finance", "teams/a/public", "glossary"):
        calls.append(("search_concepts", {"query": "alpha beta", "project": folder}))
    return calls


def _answers(dispatcher: Dispatcher, root: Path, reader: Reader | None,
             calls: list[tuple[str, dict[str, Any]]]) -> list[str]:
    out = []
    for name, arguments in calls:
        outcome = dispatcher.call(name, {"bundle_path": str(root), **arguments}, None, reader)
        out.append(f"{name} {outcome.is_error} {to_json(outcome.structured)}\n{outcome.text}")
    return out


def subfolder_questions(root: Path, files: dict[str, str]) -> list[tuple[str, dict[str, Any]]]:
    """Calls whose bundle_path names a folder of the bundle, with IDs relative to it."""
    calls: list[tuple[str, dict[str, Any]]] = []
    for folder in sorted({posixpath.dirname(p) for p in files} - {""}):
        inner = str(root / folder)
        calls.append(("list_concepts", {"bundle_path": inner}))
        for path in sorted(files):
            if path.startswith(folder + "/") and path.endswith(".md"):
                calls.append(("read_concept", {"bundle_path": inner,
                                               "concept_id": path[len(folder) + 1:-3]}))
                break
    return calls


def _check(root: Path, files: dict[str, str], scope: FolderScope) -> None:
    _write(root, files)
    calls = questions(files) + subfolder_questions(root, files)
    # R writes what it reads; the reader of the pruned copy reads everything and writes the
    # same folders (for the read tools it is the all-reading reader).
    reader = Reader("r", Access(scope, scope))
    pruned_reader = Reader("w", Access(EVERYTHING, scope))
    semantic = _semantic()
    try:
        seen = _answers(Dispatcher(ServeConfig(bundles=(str(root),)), semantic=semantic),
                        root, reader, calls)
    finally:
        semantic.close()
    _prune(root, scope)
    semantic = _semantic()
    try:
        expected = _answers(Dispatcher(ServeConfig(bundles=(str(root),)), semantic=semantic),
                            root, pruned_reader, calls)
    finally:
        semantic.close()
    for (name, arguments), got, want in zip(calls, seen, expected, strict=True):
        assert got == want, f"{name} {arguments} differs for scope {scope.patterns}"


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(files=bundles(), scope=scopes)
def test_a_reader_sees_the_pruned_bundle(tmp_path_factory: pytest.TempPathFactory,
                                         files: dict[str, str], scope: FolderScope) -> None:
    _check(tmp_path_factory.mktemp("bundle") / "b", files, scope)


@pytest.mark.slow
@settings(max_examples=LONG_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(files=bundles(), scope=scopes)
def test_a_reader_sees_the_pruned_bundle_long(tmp_path_factory: pytest.TempPathFactory,
                                              files: dict[str, str], scope: FolderScope) -> None:
    _check(tmp_path_factory.mktemp("bundle") / "b", files, scope)


def test_the_example_bundle_for_two_teams(tmp_path: Path) -> None:
    """The shipped example with a reader of one folder: the invariant holds, and the reader's
    answers do differ from the all-reading reader's (the test is not vacuous)."""
    source = Path(__file__).resolve().parent.parent / "examples" / "coffee-roastery"
    files = {
        str(p.relative_to(source)).replace(os.sep, "/"): p.read_text(encoding="utf-8")
        for p in source.rglob("*") if p.is_file()
    }
    scope = FolderScope.of(["pricing", "/"])
    root = tmp_path / "b"
    _write(root, files)
    everyone = _answers(Dispatcher(ServeConfig(bundles=(str(root),))), root, ALL_READER,
                        [("list_concepts", {})])
    _check(root, files, scope)
    _write(root, files)
    pricing = _answers(Dispatcher(ServeConfig(bundles=(str(root),))), root,
                       Reader("pricing", Access(scope, NOTHING)), [("list_concepts", {})])
    assert everyone != pricing


def test_a_subfolder_can_never_be_a_scoped_readers_bundle(tmp_path: Path) -> None:
    """Where a call could name a folder of a bundle as its bundle, that folder's files would
    be matched against R's scope as root files: there the property cannot hold, so those
    configurations refuse every call of a scoped reader (serve refuses to start with them)."""
    root = tmp_path / "b"
    _write(root, {"index.md": "# Root\n", "finance/plan.md": "---\ntype: Plan\n---\n# Plan\n"})
    reader = Reader("r", Access(FolderScope.of(["/"]), NOTHING))
    for config in (ServeConfig(allow_any_bundle=True),
                   ServeConfig(bundles=(str(root), str(root / "finance")))):
        for bundle in (root, root / "finance"):
            outcome = Dispatcher(config).call("list_concepts", {"bundle_path": str(bundle)},
                                              None, reader)
            assert outcome.is_error and outcome.structured["code"] == "operation_rejected"
            assert "plan" not in outcome.text


def test_everything_is_the_snapshot_itself(tmp_path: Path) -> None:
    _write(tmp_path / "b", {"a.md": "---\ntype: Note\n---\n# A\n"})
    snapshot, _ = load_bundle(str(tmp_path / "b"))
    assert reader_view(snapshot, EVERYTHING) is snapshot
    assert reader_view(snapshot, FolderScope.of(["/"])) is reader_view(
        snapshot, FolderScope.of(["/"]))  # kept with the snapshot, per scope
