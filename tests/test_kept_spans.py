"""Every concept's section spans kept by revision (``okf.kept_spans``): a restarted server's walk
names the sections of the concepts it reaches from what an earlier process kept, and builds no
document for them; what it reads is what the documents give. Work counters, no timing.
"""

from __future__ import annotations

import itertools
import struct
from array import array
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from bundle_mcp.cancel import CancelToken
from bundle_mcp.model import PARSED, Snapshot
from bundle_mcp.okf.graph import graph_of
from bundle_mcp.okf.kept_spans import (
    SPANS_NAME,
    packed_spans,
    span_order,
    unpacked_spans,
)
from bundle_mcp.readers import ALL_READER
from test_stored_edges import process

if TYPE_CHECKING:  # fixtures' types only; pytest provides the objects
    from conftest import BundleFactory


def sectioned(count: int = 24) -> dict[str, str]:
    """Pages linking a hub both ways, with one or several sections each."""
    files = {"index.md": '---\nokf_version: "0.2"\n---\n# Home\n\nSee [hub](/hub.md).\n',
             "hub.md": "---\ntitle: Hub\n---\n# Hub\n\nIntro.\n\n## Part\n\nText.\n"
             + "".join(f"- [p{n}](/f{n % 3}/p{n}.md)\n" for n in range(count))}
    for n in range(count):
        headings = "".join(f"\n## Step {k}\n\nDo {k}.\n" for k in range(n % 4))
        files[f"f{n % 3}/p{n}.md"] = (
            f"---\ntitle: Page {n}\n---\n{'Preamble.' if n % 2 else ''}\n"
            f"See [hub](/hub.md) and [next](/f{(n + 1) % 3}/p{(n + 1) % count}.md).\n{headings}")
    return files


def every_span(snapshot: Snapshot) -> list[tuple[str, tuple[int, ...]]]:
    """The graph's spans of every concept, asked before any document is built."""
    graph = graph_of(snapshot)
    return [(c, graph.spans(c)) for c in span_order(snapshot.concepts) if c in snapshot.concepts]


def walk(snapshot: Snapshot, dispatcher: Any, bundle: str) -> dict[str, Any]:
    found = dispatcher.call("expand_neighbors", {"bundle_path": bundle, "entity_ids": ["hub"],
                                                 "depth": 2, "limit": 5})
    assert not found.is_error
    return dict(found.structured)


def test_a_restarted_walk_names_sections_without_building_their_documents(
    tmp_bundle: BundleFactory, tmp_path: Path
) -> None:
    bundle, cache = tmp_bundle(sectioned()), tmp_path / "cache"
    process(bundle, cache, warm=True)
    dispatcher, _, restarted = process(bundle, cache)
    answer = walk(restarted, dispatcher, bundle)
    assert dispatcher.served_snapshot(bundle, CancelToken(), ALL_READER) is restarted
    # The hub and the concepts the answer renders, of the 25 the walk passes: not one built
    # for its sections alone.
    rendered = {n["metadata"]["path"] for n in answer["neighbors"]}
    built = {doc.path for doc in restarted.documents.built()}
    assert built <= {"hub.md", *rendered} and len(rendered) <= 5
    assert restarted.documents.work()[PARSED] == 0
    cold_dispatcher, _, cold = process(bundle, None)
    assert answer == walk(cold, cold_dispatcher, bundle)


def test_kept_spans_are_the_documents_spans(tmp_bundle: BundleFactory, tmp_path: Path) -> None:
    bundle, cache = tmp_bundle(sectioned()), tmp_path / "cache"
    process(bundle, cache, warm=True)
    _, _, restarted = process(bundle, cache)
    kept = every_span(restarted)
    assert list(restarted.documents.built()) == []
    _, _, cold = process(bundle, None)
    assert kept == [(c, cold.concepts[c].section_spans) for c, _ in kept]
    assert {len(spans) for _, spans in kept} >= {2, 4, 8}  # one section and several
    assert all(graph_of(restarted).sliced(c) == cold.concepts[c].sliced for c, _ in kept)


def test_spans_are_not_kept_for_a_snapshot_after_a_change(
    tmp_bundle: BundleFactory, tmp_path: Path
) -> None:
    bundle, cache = tmp_bundle(sectioned()), tmp_path / "cache"
    dispatcher, parse, first = process(bundle, cache, warm=True)
    Path(bundle, "f1/p1.md").write_text("---\ntitle: One\n---\n# A\n\nx\n\n## B\n\ny\n",
                                        encoding="utf-8")
    changed = dispatcher.served_snapshot(bundle, CancelToken(), ALL_READER)
    assert changed.revision != first.revision and not changed.loaded
    graph_of(changed).keep_spans(CancelToken())
    parse.settle_parts()
    assert changed.inbound is not None
    assert changed.inbound.stored_bytes(changed.revision, SPANS_NAME) is None
    assert graph_of(changed).spans("f1/p1") == changed.concepts["f1/p1"].section_spans
    assert len(graph_of(changed).spans("f1/p1")) == 4


def _kept(spans: list[tuple[int, ...]]) -> bytes:
    """What packed_spans writes for concepts c0, c1, … with these spans."""
    counts = array("I", map(len, spans))
    values = array("I", itertools.chain.from_iterable(spans))
    return (b"okf-spans/1\n" + struct.pack("<II", len(counts), len(values)) + counts.tobytes()
            + values.tobytes())


ORDER = ("c0", "c1", "c2")


def test_packed_spans_read_back_exactly(tmp_bundle: BundleFactory, tmp_path: Path) -> None:
    bundle = tmp_bundle(sectioned(6))
    _, _, cold = process(bundle, None)
    data = packed_spans(cold.concepts, CancelToken())
    found = unpacked_spans(data, span_order(cold.concepts))
    assert found is not None
    for concept_id in span_order(cold.concepts):
        expected = cold.concepts[concept_id].section_spans if concept_id in cold.concepts else ()
        assert found.of(concept_id) == expected
    assert found.of("no/such") is None
    good = _kept([(1, 3), (), (1, 1, 2, 9)])
    read = unpacked_spans(good, ORDER)
    assert read is not None and [read.of(c) for c in ORDER] == [(1, 3), (), (1, 1, 2, 9)]


@pytest.mark.parametrize("damaged", [
    None,
    b"",
    b"okf-spans/2\n" + _kept([(1, 3), (), ()])[12:],  # another format
    _kept([(1, 3), ()]),  # fewer concepts than the revision has
    _kept([(1, 3), (), ()])[:-1],  # truncated
    _kept([(1, 3), (), ()]) + b"\0\0\0\0",  # a value past the count
    _kept([(1, 3, 5), (), ()]),  # an odd count: half a span
    _kept([(0, 3), (), ()]),  # no line 0
    _kept([(4, 3), (), ()]),  # ends before it starts
], ids=["none", "empty", "format", "concepts", "truncated", "longer", "odd", "zero", "backwards"])
def test_spans_that_do_not_fit_are_not_used(damaged: bytes | None) -> None:
    assert unpacked_spans(damaged, ORDER) is None
