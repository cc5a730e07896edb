"""search_sections' caps (``MAX_TOKENS``, ``MAX_SECTIONS``): a bundle past one is refused with
``resource_limit``, and the refusal is kept in the totals' place, in the snapshot and by
revision in the parse cache. Finding it out builds documents until the cap is passed, which at
50,000 concepts took 9 s at every call and again after every restart. Work counters (section
indexes and documents built), no timing.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from bundle_mcp import derived
from bundle_mcp.cancel import CancelToken
from bundle_mcp.dispatch import Dispatcher, ServeConfig
from bundle_mcp.loader.parse_cache import ParseCache
from bundle_mcp.readers import ALL_READER
from bundle_mcp.snapshots import SnapshotCache
from bundle_mcp.tools import _section_index

if TYPE_CHECKING:  # fixtures' types only; pytest provides the objects
    from conftest import BundleFactory


def pages(count: int = 12) -> dict[str, str]:
    files = {"index.md": '---\nokf_version: "0.2"\n---\n# Home\n\nThe start page.\n'}
    for n in range(count):
        files[f"p{n}.md"] = (f"---\ntype: Guide\ntitle: Page {n}\n---\n# Page {n}\n\n"
                             f"Alpha beta gamma {n}.\n\n## More\n\nDelta epsilon.\n")
    return files


def process(bundle: str, cache: Path) -> tuple[Dispatcher, SnapshotCache]:
    snapshots = SnapshotCache(parse_cache=ParseCache(cache), watch=False)
    return Dispatcher(ServeConfig(bundles=(bundle,)), cache=snapshots), snapshots


def saved(dispatcher: Dispatcher, snapshots: SnapshotCache, bundle: str) -> None:
    """What the warm-up's save does (the parsed rows, then the kept parts), now."""
    snapshots.persist(bundle, dispatcher.served_snapshot(bundle, CancelToken(), ALL_READER),
                      now=True)


def section_indexes(dispatcher: Dispatcher, bundle: str) -> int:
    snapshot = dispatcher.served_snapshot(bundle, CancelToken(), ALL_READER)
    return derived.built(snapshot)["section_words"]


@pytest.mark.parametrize(("cap", "noun"), [("MAX_TOKENS", "searchable tokens"),
                                           ("MAX_SECTIONS", "sections")])
def test_a_bundle_past_a_cap_is_refused_and_the_refusal_is_kept(
    tmp_bundle: BundleFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cap: str,
    noun: str,
) -> None:
    monkeypatch.setattr(_section_index, cap, 20)
    bundle, cache = tmp_bundle(pages()), tmp_path / "cache"
    served, snapshots = process(bundle, cache)
    first = served.call("search_sections", {"query": "alpha"})
    assert first.is_error
    assert first.structured is not None
    assert first.structured["code"] == "resource_limit"
    assert first.structured["message"] == f"the bundle has more than 20 {noun}"
    indexed = section_indexes(served, bundle)
    assert 0 < indexed < len(pages())  # stopped at the cap, not every concept

    # In the same process: the same refusal, nothing indexed again.
    assert served.call("search_sections", {"query": "beta"}).text == first.text
    assert section_indexes(served, bundle) == indexed
    saved(served, snapshots, bundle)

    # A restarted server on the same files reads the refusal back: no document is built.
    restarted, _ = process(bundle, cache)
    again = restarted.call("search_sections", {"query": "alpha"})
    assert again.text == first.text
    snapshot = restarted.served_snapshot(bundle, CancelToken(), ALL_READER)
    assert list(snapshot.documents.built()) == []


def test_a_refusal_kept_under_another_cap_is_found_out_again(
    tmp_bundle: BundleFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bundle, cache = tmp_bundle(pages()), tmp_path / "cache"
    monkeypatch.setattr(_section_index, "MAX_TOKENS", 20)
    served, snapshots = process(bundle, cache)
    assert served.call("search_sections", {"query": "alpha"}).is_error
    saved(served, snapshots, bundle)

    monkeypatch.setattr(_section_index, "MAX_TOKENS", 20_000_000)  # a release with a larger cap
    restarted, _ = process(bundle, cache)
    answer = restarted.call("search_sections", {"query": "alpha"})
    assert not answer.is_error
    assert answer.structured is not None and answer.structured["hits"]
    assert section_indexes(restarted, bundle) == len(pages()) - 1  # every concept indexed


def test_what_a_refused_call_parsed_is_saved_as_any_calls(
    tmp_bundle: BundleFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_section_index, "MAX_TOKENS", 20)
    bundle = tmp_bundle(pages())
    served, snapshots = process(bundle, tmp_path / "cache")
    asked: list[str] = []
    monkeypatch.setattr(snapshots, "persist", lambda path, snapshot, now=False: asked.append(
        snapshot.revision))
    assert served.call("search_sections", {"query": "alpha"}).is_error
    assert asked == [served.served_snapshot(bundle, CancelToken(), ALL_READER).revision]
