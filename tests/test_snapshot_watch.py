"""The folder watch lets an unchanged bundle skip the stat walk, and never hides a change."""

from __future__ import annotations

import gc
import os
import sys
from pathlib import Path

import pytest

from bundle_mcp.cancel import CancelToken
from bundle_mcp.errors import BundleError
from bundle_mcp.loader import load_bundle
from bundle_mcp.loader.parse_cache import ParseCache
from bundle_mcp.loader.watch import FolderWatch
from bundle_mcp.model import Documents, revision_of
from bundle_mcp.snapshots import SnapshotCache
from toolcall import every_document_built

pytestmark = pytest.mark.skipif(
    not FolderWatch("/", [""]).active, reason="inotify is not available on this system"
)


class CountingLoader:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, path, token, previous, stats, **kwargs):
        self.calls += 1
        return load_bundle(path, token, previous, stats, **kwargs)


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    root = tmp_path / "b"
    (root / "sub").mkdir(parents=True)
    (root / "a.md").write_text("---\ntype: Note\n---\nA.\n")
    (root / "sub" / "b.md").write_text("---\ntype: Note\n---\nB.\n")
    return root


def _warm(cache: SnapshotCache, root: Path):
    cache.get(str(root), CancelToken())  # first capture
    return cache.get(str(root), CancelToken())  # walks again and arms the watch


def test_an_unchanged_bundle_is_not_walked_again(bundle: Path) -> None:
    loader = CountingLoader()
    cache = SnapshotCache(loader)
    first = _warm(cache, bundle)
    calls = loader.calls
    for _ in range(5):
        assert cache.get(str(bundle), CancelToken()) is first
    assert loader.calls == calls


@pytest.mark.parametrize(
    "change",
    [
        lambda root: (root / "a.md").write_text("---\ntype: Note\n---\nChanged.\n"),
        lambda root: (root / "sub" / "c.md").write_text("---\ntype: Note\n---\nC.\n"),
        lambda root: (root / "sub" / "b.md").unlink(),
        lambda root: os.replace(root / "sub" / "b.md", root / "b2.md"),
        lambda root: (root / "new").mkdir(),
    ],
    ids=["edit", "create", "delete", "rename", "new-folder"],
)
def test_every_change_is_seen_by_the_next_call(bundle: Path, change) -> None:
    cache = SnapshotCache(CountingLoader())
    before = _warm(cache, bundle)
    change(bundle)
    after = cache.get(str(bundle), CancelToken())
    assert after is not before


def test_a_file_in_a_new_folder_is_seen(bundle: Path) -> None:
    cache = SnapshotCache(CountingLoader())
    _warm(cache, bundle)
    (bundle / "deep").mkdir()
    cache.get(str(bundle), CancelToken())  # the new folder is not watched yet
    (bundle / "deep" / "d.md").write_text("---\ntype: Note\n---\nD.\n")
    assert "deep/d" in cache.get(str(bundle), CancelToken()).concepts


def test_the_root_is_pinned_again_on_every_call(bundle: Path, tmp_path: Path) -> None:
    cache = SnapshotCache(CountingLoader())
    _warm(cache, bundle)
    moved = tmp_path / "moved"
    os.replace(bundle, moved)
    os.symlink(moved, bundle)
    with pytest.raises(BundleError) as info:
        cache.get(str(bundle), CancelToken())
    assert info.value.code == "invalid_request"


def test_an_edit_in_place_is_reread_alone(bundle: Path) -> None:
    loader = CountingLoader()
    cache = SnapshotCache(loader)
    before = _warm(cache, bundle)
    calls = loader.calls
    (bundle / "sub" / "b.md").write_text("---\ntype: Note\ntitle: New\n---\nB2.\n")
    after = cache.get(str(bundle), CancelToken())
    assert loader.calls == calls  # no walk: only the written file was read again
    assert after.concepts["sub/b"].fm["title"] == "New"
    assert after.concepts["a"] is before.concepts["a"]
    assert after.revision == load_bundle(str(bundle))[0].revision
    assert cache.get(str(bundle), CancelToken()) is after  # the watch stays armed
    _knows_what_differs(after, before, ("sub/b.md",))


def test_editing_okfignore_walks_again(bundle: Path) -> None:
    (bundle / ".okfignore").write_text("# nothing yet\n")
    cache = SnapshotCache(CountingLoader())
    assert "sub/b" in _warm(cache, bundle).concepts
    (bundle / ".okfignore").write_text("sub/\n")
    assert "sub/b" not in cache.get(str(bundle), CancelToken()).concepts


def _knows_what_differs(after, before, expected: tuple[str, ...] | None = None) -> None:
    """A refresh hands its snapshot the files that differ from the previous capture: asked,
    the documents answer without scanning, exactly as the scan does (order included)."""
    scanned = Documents(dict(after.documents.cells)).differing(before.documents)
    assert after.documents.differing(before.documents) == scanned
    if expected is not None:
        assert sorted(scanned) == sorted(expected)
    if after is not before:  # a refresh, not the same capture: it said what it changed
        known = after.documents._changed
        assert known is not None and known[0]() is before.documents and known[1] == scanned
    # The records the revision hashed, patched from the previous capture's: sorted by path.
    assert after.documents.sorted_records == tuple(
        sorted(after.documents.records(), key=lambda r: r.path))
    assert after.revision == revision_of(list(after.documents.records()))


def _same_as_a_full_load(snapshot, root: Path) -> None:
    fresh = load_bundle(str(root))[0]
    assert list(snapshot.documents) == list(fresh.documents)  # the walk's order
    assert list(snapshot.concepts) == list(fresh.concepts)
    assert snapshot.revision == fresh.revision
    assert snapshot.assets == fresh.assets
    assert snapshot.directories == fresh.directories
    assert snapshot.skipped == fresh.skipped


NOTE = "---\ntype: Note\n---\nNew.\n"


@pytest.mark.parametrize(
    "change",
    [
        lambda root: (root / "sub" / "c.md").write_text(NOTE),
        lambda root: (root / "a-b.md").write_text(NOTE),  # sorts between "a.md" and "sub/"
        lambda root: (root / "sub" / "b.md").unlink(),
        lambda root: os.replace(root / "sub" / "b.md", root / "b2.md"),
        lambda root: (root / "sub" / "diagram.png").write_bytes(b"\x89PNG"),
        lambda root: (root / "sub" / "ignored.md").write_text(NOTE),
        lambda root: (root / ".hidden.md").write_text(NOTE),
        lambda root: ((root / "sub" / "c.md").write_text(NOTE), (root / "sub" / "c.md").unlink()),
    ],
    ids=["create", "create-ordered", "delete", "rename", "asset", "ignored", "hidden",
         "create-then-delete"],
)
def test_a_created_or_deleted_file_is_looked_at_alone(bundle: Path, change) -> None:
    (bundle / ".okfignore").write_text("sub/ignored.md\n")
    (bundle / "sub" / "old.png").write_bytes(b"\x89PNG")
    loader = CountingLoader()
    cache = SnapshotCache(loader)
    before = _warm(cache, bundle)
    calls = loader.calls
    change(bundle)
    after = cache.get(str(bundle), CancelToken())
    assert loader.calls == calls, "a file created or deleted in a watched folder costs no walk"
    _same_as_a_full_load(after, bundle)
    assert after.concepts["a"] is before.concepts["a"]
    assert cache.get(str(bundle), CancelToken()) is after  # the watch stays armed
    _knows_what_differs(after, before)


def test_several_files_changed_at_once_are_known_in_the_scans_order(bundle: Path) -> None:
    for name in ("sub/c.md", "z.md", "sub/deep/d.md", "m.md"):
        (bundle / name).parent.mkdir(parents=True, exist_ok=True)
        (bundle / name).write_text(NOTE)
    cache = SnapshotCache(CountingLoader())
    before = _warm(cache, bundle)
    (bundle / "z.md").unlink()
    (bundle / "a.md").write_text(NOTE + "edited\n")
    (bundle / "sub" / "deep" / "d.md").unlink()
    (bundle / "sub" / "a-new.md").write_text(NOTE)
    (bundle / "b-new.md").write_text(NOTE)
    after = cache.get(str(bundle), CancelToken())
    _same_as_a_full_load(after, bundle)
    _knows_what_differs(after, before, ("a.md", "b-new.md", "sub/a-new.md", "sub/deep/d.md",
                                        "z.md"))


def test_a_created_symlink_still_walks_and_is_skipped(bundle: Path) -> None:
    loader = CountingLoader()
    cache = SnapshotCache(loader)
    _warm(cache, bundle)
    calls = loader.calls
    os.symlink(bundle / "a.md", bundle / "sub" / "link.md")
    after = cache.get(str(bundle), CancelToken())
    assert loader.calls == calls + 1
    assert any(d.code == "symlink_skipped" for d in after.skipped)
    _same_as_a_full_load(after, bundle)


def _restarted(bundle: Path, folder: Path, loader: CountingLoader) -> SnapshotCache:
    """A cache over ``bundle`` as a restarted server has it: an earlier process saved every
    document to the parse cache in ``folder``."""
    earlier = SnapshotCache(parse_cache=ParseCache(folder))
    snapshot = earlier.get(str(bundle), CancelToken())
    ParseCache(folder).save(str(bundle), every_document_built(snapshot.documents))
    return SnapshotCache(loader, parse_cache=ParseCache(folder))


def test_a_restart_watches_the_cached_folders_before_its_first_walk(
    bundle: Path, tmp_path: Path
) -> None:
    """The parse cache's rows name the folders: a restart's first load arms the watch on them
    before it walks, so the next call does not walk the bundle a second time."""
    loader = CountingLoader()
    cache = _restarted(bundle, tmp_path / "cache", loader)
    first = cache.get(str(bundle), CancelToken())
    assert loader.calls == 1
    assert cache.get(str(bundle), CancelToken()) is first
    assert loader.calls == 1


@pytest.mark.parametrize(
    "change",
    [
        lambda root: (root / "sub" / "b.md").write_text("---\ntype: Note\n---\nChanged.\n"),
        lambda root: (root / "sub" / "c.md").write_text("---\ntype: Note\n---\nC.\n"),
        lambda root: (root / "a.md").unlink(),
        lambda root: (root / "new").mkdir(),
    ],
    ids=["edit", "create", "delete", "new-folder"],
)
def test_a_change_after_a_restarts_first_load_is_seen(
    bundle: Path, tmp_path: Path, change
) -> None:
    cache = _restarted(bundle, tmp_path / "cache", CountingLoader())
    before = cache.get(str(bundle), CancelToken())
    change(bundle)
    after = cache.get(str(bundle), CancelToken())
    assert after is not before
    assert after.revision == load_bundle(str(bundle))[0].revision


def test_a_folder_the_cache_does_not_name_walks_again(bundle: Path, tmp_path: Path) -> None:
    """A folder the rows do not name (one with no Markdown file) is not watched: the next
    call walks, as after a new folder."""
    (bundle / "assets").mkdir()
    (bundle / "assets" / "logo.png").write_bytes(b"png")
    loader = CountingLoader()
    cache = _restarted(bundle, tmp_path / "cache", loader)
    cache.get(str(bundle), CancelToken())
    cache.get(str(bundle), CancelToken())
    assert loader.calls == 2


# -- a cold first load: each folder watched before the walk lists it ------------------------------

CHANGES = [
    lambda root: (root / "sub" / "b.md").write_text("---\ntype: Note\n---\nChanged.\n"),
    lambda root: (root / "sub" / "c.md").write_text("---\ntype: Note\n---\nC.\n"),
    lambda root: (root / "a.md").unlink(),
    lambda root: (root / "new").mkdir(),
]


def _walks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every capture walk the loader makes (the snapshot cache's own loader)."""
    import bundle_mcp.loader as loader_package

    walks: list[str] = []
    real = loader_package.capture

    def counted(*args, **kwargs):
        walks.append("walk")
        return real(*args, **kwargs)

    monkeypatch.setattr(loader_package, "capture", counted)
    return walks


def test_a_cold_first_load_watches_each_folder_as_it_walks(
    bundle: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No parse cache names the folders: the walk adds each to the watch before listing it,
    so the next call does not walk the bundle a second time."""
    walks = _walks(monkeypatch)
    cache = SnapshotCache(parse_cache=ParseCache(tmp_path / "cache"))
    first = cache.get(str(bundle), CancelToken())
    assert walks == ["walk"]
    assert cache.get(str(bundle), CancelToken()) is first
    assert walks == ["walk"]


@pytest.mark.parametrize("change", CHANGES, ids=["edit", "create", "delete", "new-folder"])
def test_a_change_after_a_cold_first_load_is_seen(bundle: Path, tmp_path: Path, change) -> None:
    cache = SnapshotCache(parse_cache=ParseCache(tmp_path / "cache"))
    before = cache.get(str(bundle), CancelToken())
    change(bundle)
    after = cache.get(str(bundle), CancelToken())
    assert after is not before
    assert after.revision == load_bundle(str(bundle))[0].revision


def test_a_change_made_during_the_cold_walk_is_seen(
    bundle: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Files written while the walk is in ``sub``: one in the root (listed already, perhaps
    read already), one in ``sub`` (added, not listed yet). The next call sees both, whichever
    the walk read."""
    real_add = FolderWatch.add

    def add(watch: FolderWatch, folder: str) -> None:
        real_add(watch, folder)
        if folder == "sub":
            (bundle / "a.md").write_text("---\ntype: Note\n---\nWritten meanwhile.\n")
            (bundle / "sub" / "d.md").write_text("---\ntype: Note\n---\nD.\n")

    monkeypatch.setattr(FolderWatch, "add", add)
    cache = SnapshotCache(parse_cache=ParseCache(tmp_path / "cache"))
    cache.get(str(bundle), CancelToken())
    monkeypatch.setattr(FolderWatch, "add", real_add)
    after = cache.get(str(bundle), CancelToken())
    assert after.revision == load_bundle(str(bundle))[0].revision
    assert "sub/d.md" in after.documents


def test_a_cold_walk_past_the_folders_a_watch_holds_walks_again(
    bundle: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import bundle_mcp.loader.watch as watch_module

    monkeypatch.setattr(watch_module, "MAX_WATCHED_FOLDERS", 1)  # the root only, not sub
    walks = _walks(monkeypatch)
    cache = SnapshotCache(parse_cache=ParseCache(tmp_path / "cache"))
    cache.get(str(bundle), CancelToken())
    cache.get(str(bundle), CancelToken())
    assert walks == ["walk", "walk"]


def test_a_growing_watch_tells_what_changed_in_the_folders_added(bundle: Path) -> None:
    watch = FolderWatch.growing(str(bundle))
    assert watch.folders == frozenset() and watch.poll() == frozenset()
    watch.add("")
    (bundle / "sub" / "b.md").write_text("not watched yet\n")
    (bundle / "a.md").write_text("watched\n")
    assert watch.poll() == frozenset({"a.md"})
    watch.add("sub")
    (bundle / "sub" / "b.md").write_text("watched now\n")
    assert watch.folders == frozenset({"", "sub"})
    assert watch.poll() == frozenset({"sub/b.md"})
    watch.add("missing")  # a folder that cannot be watched spends the watch
    assert not watch.active and watch.poll() is None



def test_a_watch_finalized_after_its_modules_globals_were_cleared_closes_quietly(
    bundle: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # At interpreter exit a watch still held (a script's dispatcher, frozen by the warm-up) is
    # finalized after the teardown has set its module's globals to None, ``os`` included.
    import bundle_mcp.loader.watch as watch_module

    unraisable: list[object] = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    watch = FolderWatch(str(bundle), [""])
    fd = watch._fd
    assert fd >= 0
    monkeypatch.setattr(watch_module, "os", None)
    del watch
    gc.collect()
    monkeypatch.undo()
    assert unraisable == []
    with pytest.raises(OSError):
        os.fstat(fd)  # the descriptor was closed
