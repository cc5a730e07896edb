"""Work counters: a one-concept call parses one document, whatever the bundle's size.

No test here reads a clock. Each counts the documents whose Markdown was parsed during a call
(``markdown_used``: whether ``Document.markdown`` was asked for, parsed or read back),
so a feature that drags the whole bundle into a small call fails here on any machine. Issue 29
found ``read_concept`` parsing all 9,890 documents of a bundle to say which computations one
concept links to.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bundle_mcp.cancel import CancelToken
from bundle_mcp.dispatch import Dispatcher, ServeConfig
from bundle_mcp.loader.parse_cache import ParseCache, markdown_from_cache, markdown_used
from bundle_mcp.model import Snapshot, Unfrozen
from bundle_mcp.snapshots import SnapshotCache
from toolcall import every_document_built

CONCEPTS = 1_000


def _write_bundle(root: Path) -> None:
    """A chain of linked concepts in ten folders; every tenth also links a computation."""
    (root / "index.md").write_text('---\nokf_version: "0.2"\n---\n# Bundle\n', encoding="utf-8")
    (root / "calc").mkdir()
    (root / "calc" / "total.md").write_text(
        "---\ntype: Attested Computation\ntitle: Total\nruntime: sql\n---\n"
        "# Computation\n\n```sql\nSELECT 1\n```\n",
        encoding="utf-8",
    )
    for n in range(CONCEPTS):
        folder = root / f"f{n % 10}"
        folder.mkdir(exist_ok=True)
        nxt = n + 1
        body = f"# Concept {n}\n\nSee [next](/f{nxt % 10}/c{nxt}.md).\n"
        if n % 10 == 0:
            body += "\nIts figure comes from [the total](/calc/total.md).\n"
        (folder / f"c{n}.md").write_text(
            f"---\ntype: Metric\ntitle: Concept {n}\n---\n{body}", encoding="utf-8"
        )


def _parsed(snapshot: Snapshot) -> set[str]:
    return {doc.path for doc in snapshot.documents.built() if markdown_used(doc)}


def _built(snapshot: Snapshot) -> set[str]:
    """The documents built at all (frontmatter read), without building any other."""
    return {doc.path for doc in snapshot.documents.built()}


class Cold:
    """A dispatcher on a 1,000-concept bundle with no parse cache: every parse is counted."""

    def __init__(self, root: Path) -> None:
        self.bundle = str(root)
        self.cache = SnapshotCache(parse_cache=ParseCache(None), watch=False)
        self.dispatcher = Dispatcher(ServeConfig(bundles=(self.bundle,)), cache=self.cache)

    def snapshot(self) -> Snapshot:
        # The snapshot the calls ran on: the cache hands back the same object while the
        # bundle is unchanged.
        return self.cache.get(self.bundle, CancelToken())


@pytest.fixture()
def cold(tmp_path: Path) -> Cold:
    root = tmp_path / "bundle"
    root.mkdir()
    _write_bundle(root)
    return Cold(root)


def test_read_concept_parses_exactly_one_document(cold: Cold) -> None:
    outcome = cold.dispatcher.call("read_concept", {"concept_id": "f0/c10"})
    assert not outcome.is_error, outcome.structured
    # It still names the computation it links to, from its own links alone.
    assert [c["id"] for c in outcome.structured["uses_computations"]] == ["calc/total"]
    assert _parsed(cold.snapshot()) == {"f0/c10.md"}


def test_read_concept_without_computations_parses_one_document(cold: Cold) -> None:
    outcome = cold.dispatcher.call("read_concept", {"concept_id": "f3/c13"})
    assert not outcome.is_error, outcome.structured
    assert "uses_computations" not in outcome.structured
    assert _parsed(cold.snapshot()) == {"f3/c13.md"}


def test_a_load_builds_no_document(cold: Cold) -> None:
    """Capturing the bundle reads and hashes the files for the revision, nothing more."""
    work = cold.snapshot().documents.work()
    assert work == {"checked": 0, "parsed": 0, "decoded": 0, "given": 0,
                    "pending": CONCEPTS + 2}


def test_read_concept_builds_only_what_its_answer_names(cold: Cold) -> None:
    """Every file is checked (a broken one anywhere refuses the call, by the parse policy), but
    only the concept, what it links to (is the target a computation?) and the root index (the
    bundle's OKF version) are built."""
    outcome = cold.dispatcher.call("read_concept", {"concept_id": "f0/c10"})
    assert not outcome.is_error, outcome.structured
    snapshot = cold.snapshot()
    assert _built(snapshot) == {"f0/c10.md", "f1/c11.md", "calc/total.md", "index.md"}
    assert snapshot.documents.work() == {
        "checked": CONCEPTS + 2 - 4, "parsed": 4, "decoded": 0, "given": 0, "pending": 0}


def test_a_broken_file_is_still_found_by_the_check(tmp_path: Path) -> None:
    """Building late changes no answer: one broken file anywhere still refuses a one-concept
    read (the parse policy), and only the broken file is built to say why."""
    root = tmp_path / "bundle"
    root.mkdir()
    _write_bundle(root)
    (root / "f5" / "c555.md").write_text("---\ntitle: [unclosed\n---\nBody\n", encoding="utf-8")
    cold = Cold(root)
    outcome = cold.dispatcher.call("read_concept", {"concept_id": "f0/c10"})
    assert outcome.is_error
    assert "f5/c555.md" in str(outcome.structured)
    assert _built(cold.snapshot()) == {"f5/c555.md"}


def test_list_concepts_parses_no_document(cold: Cold) -> None:
    outcome = cold.dispatcher.call("list_concepts", {})
    assert not outcome.is_error, outcome.structured
    assert _parsed(cold.snapshot()) == set()


def test_outgoing_edges_agree_with_the_edge_index(cold: Cold) -> None:
    """The one-concept edges are the whole index's edges from that concept, in its order."""
    snapshot = cold.snapshot()
    for concept_id in ("f0/c0", "f0/c10", "f9/c999", "calc/total"):
        expected = tuple(e for e in snapshot.edges if e.source_id == concept_id)
        assert snapshot.outgoing_edges(concept_id) == expected
    assert snapshot.outgoing_edges("no/such") == ()


def _parsed_by_the_parser(snapshot: Snapshot) -> set[str]:
    """Documents whose Markdown facts the parser computed (not read back from the cache)."""
    return {
        doc.path for doc in snapshot.documents.built()
        if markdown_used(doc) and not markdown_from_cache(doc)
    }


RESTART_CALLS = (
    ("read_concept", {"concept_id": "f0/c10"}),
    ("get_neighbors", {"concept_id": "f0/c10"}),
    ("get_computation", {"concept_id": "calc/total"}),
    ("expand_neighbors", {"entity_ids": ["f0/c10"], "depth": 2}),
    ("search_sections", {"query": "next"}),
    ("context", {"question": "which concept comes next"}),
    ("bundle_summary", {}),
    ("validate_bundle", {"check_links": True}),
)


@pytest.mark.parametrize(("tool", "arguments"), RESTART_CALLS, ids=[c[0] for c in RESTART_CALLS])
def test_after_a_restart_on_a_filled_cache_no_call_parses(
    tmp_path: Path, tool: str, arguments: dict[str, object]
) -> None:
    """A restart reads every document's Markdown facts back from the parse cache: even a call
    that needs the whole bundle's edges parses nothing."""
    root = tmp_path / "bundle"
    root.mkdir()
    _write_bundle(root)
    bundle = str(root)
    first = SnapshotCache(parse_cache=ParseCache(tmp_path / "cache"), watch=False)
    before = first.get(bundle, CancelToken())
    for doc in before.documents.values():
        assert doc.markdown is not None  # parse everything, as the warm-up would
    ParseCache(tmp_path / "cache").save(bundle, every_document_built(before.documents))

    restarted = SnapshotCache(parse_cache=ParseCache(tmp_path / "cache"), watch=False)
    dispatcher = Dispatcher(ServeConfig(bundles=(bundle,)), cache=restarted)
    outcome = dispatcher.call(tool, arguments)
    assert not outcome.is_error, outcome.structured
    assert _parsed_by_the_parser(restarted.get(bundle, CancelToken())) == set()


def test_after_a_restart_read_concept_thaws_only_what_it_reads(tmp_path: Path) -> None:
    """Frontmatter read back from the cache is frozen on first use; a one-concept read freezes
    its own, the root index's (the version) and its computation's, never every document's
    (the snapshot's attachment check looked at every type through the frozen mapping)."""
    root = tmp_path / "bundle"
    root.mkdir()
    _write_bundle(root)
    bundle = str(root)
    first = SnapshotCache(parse_cache=ParseCache(tmp_path / "cache"), watch=False)
    loaded = first.get(bundle, CancelToken())
    ParseCache(tmp_path / "cache").save(bundle, every_document_built(loaded.documents))

    restarted = SnapshotCache(parse_cache=ParseCache(tmp_path / "cache"), watch=False)
    dispatcher = Dispatcher(ServeConfig(bundles=(bundle,)), cache=restarted)
    outcome = dispatcher.call("read_concept", {"concept_id": "f0/c10"})
    assert not outcome.is_error, outcome.structured
    snapshot = restarted.get(bundle, CancelToken())
    # Whether each file parses came from the rows' error column: no entry decoded for that.
    assert _built(snapshot) == {"f0/c10.md", "f1/c11.md", "calc/total.md", "index.md"}
    assert snapshot.documents.work()["decoded"] == 4
    assert snapshot.documents.work()["parsed"] == 0
    frozen = {doc.path for doc in snapshot.documents.built()
              if isinstance(doc.frontmatter_value, Unfrozen) and doc.frontmatter_value.is_frozen()}
    assert frozen <= {"f0/c10.md", "index.md", "calc/total.md"}
    assert "f0/c10.md" in frozen


def test_the_concept_views_agree_with_the_mapping(tmp_path: Path) -> None:
    """``Concepts.items()``/``values()`` skip the second membership check per concept; they
    must list exactly what the generic Mapping views list, a broken file left out."""
    from collections.abc import Mapping

    root = tmp_path / "bundle"
    root.mkdir()
    _write_bundle(root)
    (root / "f3" / "c3.md").write_text("---\ntype: [unclosed\n---\n", encoding="utf-8")
    snapshot = Cold(root).snapshot()
    concepts = snapshot.concepts
    assert "f3/c3" not in concepts
    assert list(concepts.items()) == list(Mapping.items(concepts))
    assert list(concepts.values()) == list(Mapping.values(concepts))
    assert len(concepts.items()) == len(concepts) == CONCEPTS  # calc/total is one, c3 is not
    assert ("f0/c10", concepts["f0/c10"]) in concepts.items()


def test_after_one_file_is_deleted_a_miss_builds_nothing_anew(
    cold: Cold, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 29: asking for a concept just deleted rebuilt the whole 'did you mean' index (0.3 s
    at 10,000 concepts). With the previous capture still held (the warm-up holds the last one
    it warmed, and warmed its index), the next read_concept builds no document and updates
    that index: the deleted concept's texts and the request are all it folds."""
    from bundle_mcp.okf import suggest

    before = cold.snapshot()
    suggest.index_of(before)  # what the warm-up's step leaves
    built = _built(before)
    Path(cold.bundle, "f5", "c555.md").unlink()
    folded: list[str] = []
    real = suggest.loose
    monkeypatch.setattr(suggest, "loose", lambda text: folded.append(text) or real(text))
    monkeypatch.setattr(suggest, "build_index", lambda snapshot: pytest.fail("built anew"))
    outcome = cold.dispatcher.call("read_concept", {"concept_id": "f5/c555"})
    assert outcome.structured["code"] == "concept_not_found"
    after = cold.snapshot()
    assert after.predecessor() is before
    assert _built(after) == built - {"f5/c555.md"}
    assert _parsed(after) == set()  # no Markdown parsed, before or after
    assert len(folded) == 5, folded  # its ID, stem and title; the request and its last segment
    monkeypatch.undo()
    fresh = Cold(Path(cold.bundle)).dispatcher.call("read_concept", {"concept_id": "f5/c555"})
    assert outcome.structured == fresh.structured


def test_after_one_file_is_edited_only_that_file_is_asked_whether_it_parses(
    cold: Cold, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every call asks which files do not parse (the parse policy). After an edit the answer of
    the previous capture stands for every file whose bytes did not change: the next call asks
    the edited file alone, and lists the concepts by patching the previous list."""
    from bundle_mcp import model

    assert not cold.dispatcher.call("read_concept", {"concept_id": "f0/c10"}).is_error
    before = cold.snapshot()
    path = Path(cold.bundle, "f3", "c13.md")
    path.write_text(path.read_text(encoding="utf-8") + "\nEdited.\n", encoding="utf-8")
    asked: list[str] = []
    real = model.Deferred.parse_error

    def counting(cell: model.Deferred) -> object:
        asked.append(cell.record.path)
        return real(cell)

    monkeypatch.setattr(model.Deferred, "parse_error", counting)
    outcome = cold.dispatcher.call("read_concept", {"concept_id": "f3/c13"})
    assert not outcome.is_error, outcome.structured
    assert "Edited." in outcome.text
    after = cold.snapshot()
    assert after.predecessor() is before
    assert set(asked) <= {"f3/c13.md", "f4/c14.md", "index.md"}, len(asked)
    assert list(after.concepts) == list(before.concepts)


def test_a_second_validation_walks_no_document_again(
    cold: Cold, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The walk over every file's kept findings is kept with the snapshot (issue 29: ~100 ms at
    10,000 files, on the first call of each variant after a restart): another ``as_of`` (an
    answer not kept) looks up no document's findings again, and still reports staleness."""
    from bundle_mcp import validation

    stale = Path(cold.bundle, "f2", "c2.md")
    stale.write_text("---\ntype: Metric\ntitle: Concept 2\nstale_after: 2026-01-01\n---\n# C\n",
                     encoding="utf-8")
    first = cold.dispatcher.call("validate_bundle", {"check_links": True})
    assert not first.is_error, first.structured
    looked: list[str] = []
    real = validation.of_document

    def counting(doc: object, *args: object, **kwargs: object) -> object:
        looked.append(getattr(doc, "path", "?"))
        return real(doc, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(validation, "of_document", counting)
    again = cold.dispatcher.call("validate_bundle", {"check_links": True, "as_of": "2026-06-01"})
    assert not again.is_error, again.structured
    assert looked == []
    codes = [d["code"] for d in again.structured["diagnostics"]]
    assert "stale_concept" in codes
    assert "stale_concept" not in [d["code"] for d in first.structured["diagnostics"]]


def test_a_rare_word_checks_only_the_candidate_bodies(
    cold: Cold, monkeypatch: pytest.MonkeyPatch
) -> None:
    """search_concepts scans every body until the warm-up has built the body word index, then
    checks (folds, if need be) only the bodies of the concepts the index names for the needle:
    one here."""
    from bundle_mcp import model
    from bundle_mcp.tools import _body_words, search_concepts

    snapshot = cold.snapshot()
    scans: list[str] = []
    checked: list[str] = []
    real_scan, real_holds = search_concepts.SearchFields._scanned, model.Document.folded_body_holds
    monkeypatch.setattr(search_concepts.SearchFields, "_scanned",
                        lambda self, needle, token: scans.append(needle)
                        or real_scan(self, needle, token))
    monkeypatch.setattr(model.Document, "folded_body_holds",
                        lambda self, needle: checked.append(self.path)
                        or real_holds(self, needle))

    def search() -> object:
        # "c417" is a word of one body only, f6/c416's link; "md" is in every body's words.
        outcome = cold.dispatcher.call("search_concepts", {"query": "C417.md"})
        assert not outcome.is_error, outcome.structured
        return outcome.structured

    scanned = search()
    assert (scans, checked) == (["c417.md"], [])  # every body, in one scan
    scans.clear()
    _body_words.index_of(snapshot, CancelToken())  # what the warm-up builds
    assert search() == scanned
    assert (scans, checked) == ([], ["f6/c416.md"])
    assert [hit["concept"]["id"] for hit in scanned["hits"]] == ["f6/c416"]  # type: ignore[index]
