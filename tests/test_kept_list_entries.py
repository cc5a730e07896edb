"""list_concepts' entries are kept by revision in the parse cache: a restarted server reads
them back and builds no document for them, and every call (any as_of, either profile) answers
what a server that built them answers. The warm-up's documents step no longer folds each
concept's search fields, so a restart freezes no frontmatter for them. Work counters and
equality, no timing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from bundle_mcp.cancel import CancelToken
from bundle_mcp.dispatch import Dispatcher, ServeConfig
from bundle_mcp.model import Snapshot, Unfrozen
from bundle_mcp.okf.temporal import DATE_PROFILE, INSTANT_PROFILE
from bundle_mcp.readers import ALL_READER
from bundle_mcp.readiness import warm_steps
from bundle_mcp.tools import list_concepts
from bundle_mcp.tools.list_concepts import LIST_ENTRY
from restarts import answers, kept_by, kept_rows, process, replace_row, restart, saved, snapshot_of

if TYPE_CHECKING:  # fixtures' types only; pytest provides the objects
    from conftest import BundleFactory

CALLS: list[dict[str, Any]] = [
    {}, {"as_of": "2027-01-01"}, {"temporal_profile": INSTANT_PROFILE},
    {"temporal_profile": INSTANT_PROFILE, "as_of": "2027-01-01T00:00:00Z"},
]


CAFE = " caf\u00e9"  # one body that is not ASCII: its fold is kept


def pages() -> dict[str, str]:
    files = {"index.md": '---\nokf_version: "0.2"\n---\n# Home\n\nSee [a](/a/p0.md).\n'}
    for n in range(6):
        files[f"a/p{n}.md"] = (
            f"---\ntype: Guide\ntitle: Page {n} \u00e9t\u00e9\ntags: [t{n % 2}]\n"
            + ("stale_after: '2026-01-01'\n" if n % 3 == 0 else "")
            + ("status: deprecated\n" if n % 2 else "")
            + ("runtime: python\nexecutor: {resource: 'run/x'}\n" if n == 4 else "")
            + "sources:\n  - {id: s1, resource: 'https://example.org', title: S}\n"
            + f"---\n# Page {n}\n\nText{CAFE if n == 5 else ''}.\n")
    return files


def lists(dispatcher: Dispatcher) -> list[str]:
    return answers(dispatcher, "list_concepts", CALLS)


def warm_entries(snapshot: Snapshot) -> None:
    warm = LIST_ENTRY.warm
    assert warm is not None
    warm(snapshot, CancelToken())


def kept(bundle: str, cache: Path) -> list[str]:
    """A first process's answers, its entries kept as its warm-up keeps them."""

    def made_by(first: Dispatcher, snapshot: Snapshot) -> list[str]:
        warm_entries(snapshot)
        return lists(first)

    return kept_by(bundle, cache, made_by)


def test_a_restart_reads_the_entries_back_without_a_document(
    tmp_bundle: BundleFactory, tmp_path: Path
) -> None:
    bundle, cache = tmp_bundle(pages()), tmp_path / "cache"
    made = kept(bundle, cache)

    restarted, snapshot = restart(bundle, cache)
    warm_entries(snapshot)
    # Only the root index.md, whose okf_version decides whether the bundle is legacy.
    assert [doc.path for doc in snapshot.documents.built()] == ["index.md"]
    # Read back with their nested objects shared value for value, as a build shares them.
    entries = [list_concepts._entry_of(snapshot, concept_id, DATE_PROFILE, False, {})[0]
               for concept_id in snapshot.concepts]
    for key in list_concepts.SHARED_KEYS:
        assert len({id(e[key]) for e in entries}) == len({repr(e[key]) for e in entries}) < 6
    assert lists(restarted) == made
    assert [doc.path for doc in snapshot.documents.built()] == ["index.md"]
    uncached = Dispatcher(ServeConfig(bundles=(bundle,)))
    assert lists(uncached) == made


@pytest.mark.parametrize("damage", ["garbage", "another count", "another order",
                                    "another shape"])
def test_damaged_kept_entries_are_built_again(
    tmp_bundle: BundleFactory, tmp_path: Path, damage: str
) -> None:
    bundle, cache = tmp_bundle(pages()), tmp_path / "cache"
    made = kept(bundle, cache)
    rows = kept_rows(cache, "%list-entries/2/%")
    assert len(rows) == 1  # the default profile's
    (rowid, value), = rows
    header, *lines = value.decode().splitlines()
    entries = [entry for line in lines for entry in json.loads(line)]
    if damage == "another count":
        entries.pop()
    elif damage == "another order":
        entries.reverse()
    elif damage == "another shape":
        entries[1]["status_state"] = "stable"
    text = f"{header}\n{json.dumps(entries)}\n"
    if damage == "garbage":
        text = "[1,"
    replace_row(cache, rowid, text.encode())

    restarted, snapshot = restart(bundle, cache)
    warm_entries(snapshot)
    assert len(list(snapshot.documents.built())) == len(pages())  # built again
    assert lists(restarted) == made


def test_a_restarts_warm_up_folds_no_search_fields(
    tmp_bundle: BundleFactory, tmp_path: Path
) -> None:
    """The search columns are read back, so nothing needs each concept's folds after a
    restart. Every text here is not ASCII (a title), so the scan's sorting builds each
    document, which holds the frontmatter the warm-up froze (smaller than the JSON read back,
    and every card reads it); a body that is not ASCII keeps its fold alone."""
    bundle, cache = tmp_bundle(pages()), tmp_path / "cache"
    first, snapshots, parse = process(bundle, cache)
    snapshot = snapshot_of(first, bundle)
    for step in warm_steps(first, bundle, ALL_READER, snapshot):
        step.build(CancelToken())
    saved(snapshots, parse, bundle, snapshot)

    restarted, _, _ = process(bundle, cache)
    view = snapshot_of(restarted, bundle)
    steps = warm_steps(restarted, bundle, ALL_READER, view)
    for step in steps:
        if (step.name.startswith(("documents", "fields"))
                or step.name in ("search_fields", "list_entry")):
            step.build(CancelToken())
    concepts = [doc for doc in view.documents.built() if doc.is_concept]
    assert len(concepts) == len(pages()) - 1
    assert all(isinstance(doc.frontmatter_value, Unfrozen) and doc.frontmatter_value.is_frozen()
               for doc in concepts)
    assert not any("folded" in vars(doc) for doc in concepts)
    assert [doc.path for doc in concepts if vars(doc).get("_body_fold")] == ["a/p5.md"]
    # A search still finds the concepts by a folded title and by their bodies.
    uncached = Dispatcher(ServeConfig(bundles=(bundle,)))
    for query, total in (("\u00c9T\u00c9", 6), ("TEXT", 6), ("CAF\u00c9", 1)):
        found = restarted.call("search_concepts", {"query": query}).structured
        assert found["total"] == total
        assert found == uncached.call("search_concepts", {"query": query}).structured
