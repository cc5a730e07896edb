"""A validation's whole-bundle findings (each variant's walk over every file, the orphans, the
bundle's own findings) are kept by revision in the parse cache: a restarted server reads them
back, builds no document for them (not even the concepts that may be stale: the walk keeps
their ``stale_after`` and its line, and each call decides their staleness from those) and gives
what building them gives. Work counters and equality, no timing.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from bundle_mcp import derived, zstd_frames
from bundle_mcp.cancel import CancelToken
from bundle_mcp.dispatch import Dispatcher, ServeConfig
from bundle_mcp.loader.parse_cache import ParseCache, markdown_used
from bundle_mcp.model import Snapshot
from bundle_mcp.okf.temporal import reference_from
from bundle_mcp.readers import ALL_READER
from bundle_mcp.snapshots import SnapshotCache
from bundle_mcp.tools.bundle_summary import counts_of, summary_counts
from bundle_mcp.validation import ValidateOptions, validate

if TYPE_CHECKING:  # fixtures' types only; pytest provides the objects
    from conftest import BundleFactory

VARIANTS = [
    {},
    {"check_links": True, "check_orphans": True},
    {"strict": True, "check_links": True},
]


def pages() -> dict[str, str]:
    files = {"index.md": '---\nokf_version: "0.2"\n---\n# Home\n\nSee [a](/a/p0.md).\n',
             "a/index.md": "# A\n\n- [p0](p0.md)\n",
             "logo.md": "---\ntype: Note\n---\nSee [the logo](/assets/logo.png).\n"}
    for n in range(8):
        files[f"a/p{n}.md"] = (
            f"---\ntype: Guide\ntitle: Page {n}\n"
            + ("stale_after: '2026-01-01'\n" if n % 3 == 0 else "")
            + f"---\n# Page {n}\n\n## Part\n\nSee [next](p{n + 1}.md#part), "
            f"[gone](/nowhere.md) and [bad](p{n}.md#nothing).\n")
    files["b/untyped.md"] = "# No frontmatter\n\nText.\n"
    return files


def process(bundle: str, cache: Path) -> tuple[Dispatcher, SnapshotCache]:
    snapshots = SnapshotCache(parse_cache=ParseCache(cache), watch=False)
    return Dispatcher(ServeConfig(bundles=(bundle,)), cache=snapshots), snapshots


def snapshot_of(dispatcher: Dispatcher, bundle: str) -> Snapshot:
    return dispatcher.served_snapshot(bundle, CancelToken(), ALL_READER)


def reports(snapshot: Snapshot) -> list[dict[str, Any]]:
    out = []
    for variant in VARIANTS:
        for as_of in (None, "2027-01-01"):
            reference = reference_from({} if as_of is None else {"as_of": as_of})
            options = ValidateOptions(reference, **variant)
            out.append(validate(snapshot, options, CancelToken()))
    return out


def kept_by(bundle: str, cache: Path) -> list[dict[str, Any]]:
    """A first process's reports, its findings kept as the warm-up's save keeps them."""
    first, snapshots = process(bundle, cache)
    snapshot = snapshot_of(first, bundle)
    made = reports(snapshot)
    snapshots.persist(bundle, snapshot, now=True)
    return made


def test_a_restart_reads_every_variants_findings_back(
    tmp_bundle: BundleFactory, tmp_path: Path
) -> None:
    bundle, cache = tmp_bundle(pages()), tmp_path / "cache"
    made = kept_by(bundle, cache)
    # The walk has something to keep.
    assert {d["code"] for d in made[3]["diagnostics"]} >= {
        "broken_link", "missing_anchor", "orphan", "stale_concept"}

    restarted, _ = process(bundle, cache)
    again = snapshot_of(restarted, bundle)
    assert reports(again) == made
    # Only the root index.md is built, whose okf_version decides the rules: the concepts that
    # may be stale are judged at each as_of from the date and line the walk kept.
    assert sorted(doc.path for doc in again.documents.built()) == ["index.md"]
    assert not any(markdown_used(doc) for doc in again.documents.built())
    # Each document's link findings are back in their places, for the edit that follows.
    assert derived.built(again)["link_findings"] == len(again.documents)

    uncached = Dispatcher(ServeConfig(bundles=(bundle,)))
    assert reports(snapshot_of(uncached, bundle)) == made


def test_findings_kept_for_other_assets_or_folders_are_not_read(
    tmp_bundle: BundleFactory, tmp_path: Path
) -> None:
    bundle, cache = tmp_bundle(pages()), tmp_path / "cache"
    made = kept_by(bundle, cache)
    Path(bundle, "assets").mkdir()
    Path(bundle, "assets", "logo.png").write_bytes(b"\x89PNG")  # the revision stays the same
    Path(bundle, "c").mkdir()

    restarted, _ = process(bundle, cache)
    again = snapshot_of(restarted, bundle)
    uncached = reports(snapshot_of(Dispatcher(ServeConfig(bundles=(bundle,))), bundle))
    assert reports(again) == uncached != made


@pytest.mark.parametrize("damage", ["garbage", "a row of another shape", "an unknown file",
                                    "a date of another shape"])
def test_damaged_kept_findings_are_made_again(
    tmp_bundle: BundleFactory, tmp_path: Path, damage: str
) -> None:
    bundle, cache = tmp_bundle(pages()), tmp_path / "cache"
    made = kept_by(bundle, cache)
    replacement = {"garbage": "[1,", "a row of another shape": "[[[[1,2]],null,[]]],{}]",
                   "an unknown file": '[[[[], ["a/ghost.md", "2026-01-01", 4], []]], {}]',
                   "a date of another shape": '[[[[], ["a/p0.md", 20260101, 4], []]], {}]',
                   }[damage]
    (database,) = (cache / "parse").glob("*.sqlite3")
    with sqlite3.connect(database) as db:
        rows = db.execute("SELECT rowid, key FROM parts WHERE key LIKE '%findings/_/%'").fetchall()
        assert len(rows) == 3 + 2  # three walks, the orphans, the bundle's own
        for rowid, _ in rows:
            db.execute("UPDATE parts SET value = ? WHERE rowid = ?",
                       (zstd_frames.packed(replacement.encode()), rowid))

    restarted, _ = process(bundle, cache)
    assert reports(snapshot_of(restarted, bundle)) == made


def test_a_restart_reads_the_bundles_summary_counts_back(
    tmp_bundle: BundleFactory, tmp_path: Path
) -> None:
    bundle, cache = tmp_bundle(pages()), tmp_path / "cache"
    first, snapshots = process(bundle, cache)
    snapshot = snapshot_of(first, bundle)
    made = summary_counts(snapshot, None, CancelToken())
    assert made.orphans and made.broken_links  # something to keep
    snapshots.persist(bundle, snapshot, now=True)

    restarted, _ = process(bundle, cache)
    again = snapshot_of(restarted, bundle)
    assert summary_counts(again, None, CancelToken()) == made
    assert not any(markdown_used(doc) for doc in again.documents.built())
    # A project's are made (only the whole bundle's are kept by revision).
    assert summary_counts(again, "a", CancelToken()) == counts_of(snapshot, "a", CancelToken())
    assert summary_counts(again, None, CancelToken()) == counts_of(
        snapshot_of(Dispatcher(ServeConfig(bundles=(bundle,))), bundle), None, CancelToken())

    (database,) = (cache / "parse").glob("*.sqlite3")
    with sqlite3.connect(database) as db:
        db.execute("UPDATE parts SET value = ? WHERE key LIKE '%summary-counts/1/%'",
                   (zstd_frames.packed(b'[1, 2, [["Guide", "8"]]]'),))
    damaged, _ = process(bundle, cache)
    assert summary_counts(snapshot_of(damaged, bundle), None, CancelToken()) == made
