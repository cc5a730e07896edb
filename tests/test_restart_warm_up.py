"""A restarted server's warm-up over a filled parse cache builds no document (issue 29).

Every structure is read back, and search_concepts' scan reads an ASCII text from its file
without its document, as the columns kept with the revision say which texts are ASCII, how
long, and where their bodies start (``search_concepts.KnownTexts``). Only a text that is not
ASCII needs its document (for its body's kept fold). Work counters and equal answers, no clock.
"""

from __future__ import annotations

from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING

import pytest

from bundle_mcp.cancel import CancelToken
from bundle_mcp.dispatch import Dispatcher, ServeConfig
from bundle_mcp.frozen_map import FrozenMap
from bundle_mcp.loader.parse_cache import ParseCache
from bundle_mcp.model import FROZEN_FIELDS, Concepts, Snapshot, Unfrozen, thaw
from bundle_mcp.readers import ALL_READER
from bundle_mcp.readiness import warm_steps
from bundle_mcp.snapshots import SnapshotCache
from bundle_mcp.tools import search_concepts
from restarts import answers, process, restart, saved, snapshot_of

if TYPE_CHECKING:  # fixtures' types only; pytest provides the objects
    from conftest import BundleFactory

# Not ASCII: a body (its fold is kept), and a title only (its ASCII body is cut out and folded).
ACCENTED_BODY, ACCENTED_TITLE = "b/accented-body.md", "b/accented-title.md"


def pages() -> dict[str, str]:
    files = {"index.md": '---\nokf_version: "0.2"\n---\n# Home\n\nSee [a](/a/p0.md).\n'}
    for n in range(24):
        files[f"a/p{n}.md"] = (
            f"---\ntype: Guide\ntitle: Page {n}\ntags: [t{n % 3}]\n---\n# Page {n}\n\n"
            f"The pipeline step {n} reads [the next](/a/p{(n + 1) % 24}.md).\n\n"
            f"## Notes\n\nMixedCase Words {n % 5} and more.\n")
    files[ACCENTED_BODY] = ("---\ntype: Guide\ntitle: Body\n---\n# Body\n\n"
                            "The CAF\u00c9 pipeline, stra\u00dfe.\n")
    files[ACCENTED_TITLE] = ("---\ntype: Guide\ntitle: \u00c9t\u00e9\n---\n# Title\n\n"
                             "The pipeline step of summer.\n")
    return files


# Substrings no word of the body index narrows (a word's middle, across words, a fold), so
# the scan reads every body; a whole word, which the index narrows; the frontmatter's text,
# which no body holds, and a body's first heading.
NEEDLES = ["ipelin", "step 1", "cafe", "CAF\u00c9", "strasse", "edcase wor", "mmer",
           "pipeline", "nowhere at all", "ype: gui", "\n# page"]
CALLS = [{"query": needle, "limit": 100} for needle in NEEDLES]


def warmed_and_saved(bundle: str, cache: Path) -> list[str]:
    """A first process: warmed as a server warms, its answers, then saved as it saves."""
    first, snapshots, parse = process(bundle, cache)
    snapshot = snapshot_of(first, bundle)
    for step in warm_steps(first, bundle, ALL_READER, snapshot):
        step.build(CancelToken())
    made = answers(first, "search_concepts", CALLS)
    saved(snapshots, parse, bundle, snapshot)
    return made


def built_paths(snapshot: Snapshot) -> set[str]:
    return {doc.path for doc in snapshot.documents.built()}


def test_a_restarts_warm_up_builds_only_the_documents_of_texts_not_ascii(
    tmp_bundle: BundleFactory, tmp_path: Path
) -> None:
    bundle, cache = tmp_bundle(pages()), tmp_path / "cache"
    made = warmed_and_saved(bundle, cache)

    restarted, snapshot = restart(bundle, cache)
    steps = warm_steps(restarted, bundle, ALL_READER, snapshot)
    assert not any(step.name.startswith("documents") for step in steps)
    for step in steps:
        step.build(CancelToken())
    # The root index (its okf_version) and the two texts that are not ASCII; none parsed.
    assert built_paths(snapshot) == {"index.md", ACCENTED_BODY, ACCENTED_TITLE}
    assert snapshot.documents.work()["parsed"] == 0
    assert answers(restarted, "search_concepts", CALLS) == made
    assert built_paths(snapshot) == {"index.md", ACCENTED_BODY, ACCENTED_TITLE}
    uncached = Dispatcher(ServeConfig(bundles=(bundle,)))
    assert answers(uncached, "search_concepts", CALLS) == made


def test_a_restarts_warm_up_freezes_each_frontmatter_which_the_document_then_holds(
    tmp_bundle: BundleFactory, tmp_path: Path
) -> None:
    """Each concept's frontmatter is frozen by the warm-up without its document (a walk's
    cards read it); a document built later holds that same mapping, once."""
    bundle, cache = tmp_bundle(pages()), tmp_path / "cache"
    warmed_and_saved(bundle, cache)
    restarted, snapshot = restart(bundle, cache)
    for step in warm_steps(restarted, bundle, ALL_READER, snapshot):
        step.build(CancelToken())
    concepts = snapshot.concepts
    assert isinstance(concepts, Concepts)
    held = {concept_id: concepts.fields_of(concept_id) for concept_id in concepts}
    assert all(isinstance(fields, FrozenMap | MappingProxyType) for fields in held.values())
    assert "a/p3" not in {doc.concept_id for doc in snapshot.documents.built()}
    assert held["a/p3"] is concepts.fields_of("a/p3")  # kept, not read again
    doc = concepts["a/p3"]  # built now, from its row
    assert isinstance(doc.frontmatter_value, Unfrozen)
    assert doc.frontmatter_value.is_frozen() and doc.fields is held["a/p3"]
    assert not any(key == FROZEN_FIELDS for key in doc.memo.keys())
    assert thaw(doc.fields) == {"type": "Guide", "title": "Page 3", "tags": ["t0"]}


def test_a_restarted_scan_reads_a_file_edited_since_from_a_new_capture(
    tmp_bundle: BundleFactory, tmp_path: Path
) -> None:
    """The text a scan reads from a file is checked against the bytes the snapshot counted:
    an edit made after the restart is never read as the old text, the call is answered from
    a new capture."""
    bundle, cache = tmp_bundle(pages()), tmp_path / "cache"
    warmed_and_saved(bundle, cache)
    restarted, snapshot = restart(bundle, cache)
    for step in warm_steps(restarted, bundle, ALL_READER, snapshot):
        step.build(CancelToken())
    edited = Path(bundle, "a", "p7.md")
    edited.write_text(edited.read_text(encoding="utf-8") + "\nA quokkaline remark.\n",
                      encoding="utf-8")
    (found,) = answers(restarted, "search_concepts", [{"query": "okkalin"}])
    assert '"a/p7"' in found


@pytest.mark.parametrize(("kept", "expected"), [
    ({}, None),  # kept by a version that kept no texts: every body asked of its document
    ({"ascii_positions": [0, 2], "ascii_lengths": [10, 20], "ascii_starts": [3, 4]}, True),
    ({"ascii_positions": [2, 0], "ascii_lengths": [10, 20], "ascii_starts": [3, 4]}, False),
    ({"ascii_positions": [0, 0], "ascii_lengths": [10, 20], "ascii_starts": [3, 4]}, False),
    ({"ascii_positions": [0, 99], "ascii_lengths": [10, 20], "ascii_starts": [3, 4]}, False),
    ({"ascii_positions": [-1], "ascii_lengths": [10], "ascii_starts": [3]}, False),
    ({"ascii_positions": [0], "ascii_lengths": [10], "ascii_starts": [11]}, False),
    ({"ascii_positions": [0], "ascii_lengths": [10, 1], "ascii_starts": [3]}, False),
    ({"ascii_positions": [0], "ascii_lengths": [10]}, False),
    ({"ascii_positions": [0], "ascii_lengths": ["10"], "ascii_starts": [3]}, False),
    ({"ascii_positions": [True], "ascii_lengths": [10], "ascii_starts": [3]}, False),
])
def test_kept_texts_are_used_only_when_they_fit_the_concepts(
    tmp_bundle: BundleFactory, kept: dict[str, object], expected: bool | None
) -> None:
    bundle = tmp_bundle(pages())
    dispatcher, _, _ = process(bundle, Path(bundle).parent / "unused-cache")
    snapshot = snapshot_of(dispatcher, bundle)
    columns = {"ids": [], "titles": [], "descriptions": [], "tags": [], "tag_owners": []}
    count = len(snapshot.concepts)
    columns.update(ids=[""] * count, titles=[""] * count, descriptions=[""] * count)
    fields = search_concepts._read_back(snapshot, {**columns, **kept})
    if expected is False:
        assert fields is None  # then the columns are built again, from the documents
    else:
        assert fields is not None
        assert (fields.known is not None) is bool(expected)
    assert built_paths(snapshot) <= {"index.md"}


def test_a_restarts_warm_up_passes_over_a_file_that_does_not_parse(
    tmp_bundle: BundleFactory, tmp_path: Path
) -> None:
    """A file at a concept's path that does not parse is no concept: the steps that freeze
    each concept's frontmatter leave it out (its row says so) and every step completes."""
    files = {**pages(), "a/broken.md": "---\ntitle: [unclosed\n---\n# Broken\n"}
    bundle, cache = tmp_bundle(files), tmp_path / "cache"
    config = ServeConfig(bundles=(bundle,), skip_unparseable=True)
    runs = []
    for _ in range(2):  # a first process, then a restart on what it saved
        parse = ParseCache(cache)
        snapshots = SnapshotCache(parse_cache=parse, watch=False)
        dispatcher = Dispatcher(config, cache=snapshots)
        snapshot = snapshot_of(dispatcher, bundle)
        steps = warm_steps(dispatcher, bundle, ALL_READER, snapshot)
        for step in steps:
            step.build(CancelToken())  # raises if a step fails
        runs.append((steps, answers(dispatcher, "search_concepts", CALLS)))
        saved(snapshots, parse, bundle, snapshot)
    (cold_steps, made), (restart_steps, again) = runs
    assert any(step.name.startswith("fields") for step in restart_steps)
    assert not any(step.name.startswith("fields") for step in cold_steps)
    assert "a/broken" not in snapshot.concepts and again == made
    assert snapshot.documents.work()["parsed"] == 0


def test_a_document_built_before_the_warm_up_has_its_frontmatter_frozen_by_it(
    tmp_bundle: BundleFactory, tmp_path: Path
) -> None:
    """A document built before the warm-up's steps (by a call) holds its frontmatter as its
    row gave it; the steps freeze it, as they freeze every concept's."""
    bundle, cache = tmp_bundle(pages()), tmp_path / "cache"
    warmed_and_saved(bundle, cache)
    restarted, snapshot = restart(bundle, cache)
    doc = snapshot.documents["a/p4.md"]  # built now, from its row
    assert isinstance(doc.frontmatter_value, Unfrozen)
    assert not doc.frontmatter_value.is_frozen()
    for step in warm_steps(restarted, bundle, ALL_READER, snapshot):
        step.build(CancelToken())
    assert doc.frontmatter_value.is_frozen()
