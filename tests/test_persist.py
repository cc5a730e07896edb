"""The server saves what it parsed to the persistent cache, after the call, in the background."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from bundle_mcp import snapshots
from bundle_mcp.cancel import CancelToken
from bundle_mcp.loader.parse_cache import ParseCache
from bundle_mcp.model import Snapshot
from bundle_mcp.snapshots import SnapshotCache
from toolcall import every_document_built


def _notes(tmp_path: Path, count: int) -> Path:
    """A bundle of ``count`` small notes, c0.md, c1.md, …"""
    root = tmp_path / "b"
    root.mkdir()
    for n in range(count):
        (root / f"c{n}.md").write_text(f"---\ntype: Note\ntitle: C{n}\n---\n# C{n}\n\nBody.\n")
    return root


def test_a_served_snapshot_is_saved_and_reused(tmp_path: Path) -> None:
    root = _notes(tmp_path, 3)
    cache = ParseCache(tmp_path / "cache")
    served = SnapshotCache(parse_cache=cache)
    snapshot = served.get(str(root), CancelToken())
    # What a call or the warm-up built is saved; a document nothing has needed yet is not.
    every_document_built(snapshot.documents)
    served.persist(str(root), snapshot)
    deadline = time.monotonic() + 10
    while not cache.load(str(root)) and time.monotonic() < deadline:
        time.sleep(0.05)
    entries = cache.load(str(root))
    assert set(entries) == {"c0.md", "c1.md", "c2.md"}
    restarted = SnapshotCache(parse_cache=cache).get(str(root), CancelToken())
    assert restarted.revision == snapshot.revision
    assert all(doc.frontmatter is not None for doc in restarted.documents.values())


def test_a_save_asked_for_now_is_done_when_persist_returns(tmp_path: Path) -> None:
    # The warm-up saves this way before it says the bundle is warm: a server that says so has
    # no save running behind the calls that follow.
    root = _notes(tmp_path, 3)
    cache = ParseCache(tmp_path / "cache")
    served = SnapshotCache(parse_cache=cache)
    snapshot = served.get(str(root), CancelToken())
    every_document_built(snapshot.documents)
    served.persist(str(root), snapshot, now=True)
    assert set(cache.load(str(root))) == {"c0.md", "c1.md", "c2.md"}


class _HeldFirstSave(ParseCache):
    """A parse cache whose first save waits until the test lets it go on."""

    def __init__(self, directory: Path) -> None:
        super().__init__(directory)
        self.first_started = threading.Event()
        self.go_on = threading.Event()
        self.finished = 0

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self.first_started.is_set():
            self.first_started.set()
            assert self.go_on.wait(30)
        super().save(*args, **kwargs)
        self.finished += 1


def _served_held(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, delay: float
                 ) -> tuple[Path, _HeldFirstSave, SnapshotCache, Snapshot]:
    """Forty notes served over a parse cache whose first save waits for ``go_on``, background
    saves starting ``delay`` seconds after the call that set them off; their snapshot."""
    monkeypatch.setattr(snapshots, "PERSIST_DELAY_SECONDS", delay)
    root = _notes(tmp_path, 40)
    cache = _HeldFirstSave(tmp_path / "cache")
    served = SnapshotCache(parse_cache=cache)
    return root, cache, served, served.get(str(root), CancelToken())


def test_a_save_asked_for_now_waits_for_one_in_progress_and_then_saves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The warm-up's own calls start a background save early; the warm-up's last save must not
    # be skipped because that one is still running (it saw only some documents built).
    root, cache, served, snapshot = _served_held(tmp_path, monkeypatch, delay=0.0)
    served.persist(str(root), snapshot)  # the background save of a call: it is held
    assert cache.first_started.wait(30)
    every_document_built(snapshot.documents)
    saving_now = threading.Thread(target=served.persist, args=(str(root), snapshot),
                                  kwargs={"now": True})
    saving_now.start()
    cache.go_on.set()
    saving_now.join(30)
    assert not saving_now.is_alive()
    assert cache.finished == 2  # the held save, then the one asked for now
    assert set(cache.load(str(root))) == {f"c{n}.md" for n in range(40)}


def test_a_background_save_overtaken_by_a_save_of_the_same_bodies_saves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The warm-up's kept answers are calls: the first sets off a background save a moment
    # later, and the warm-up's own save (asked for now) of every body runs before it. Once
    # that one is done, the background one would only look for rows to find none.
    root, cache, served, snapshot = _served_held(tmp_path, monkeypatch, delay=0.3)
    cache.go_on.set()  # held by nothing: only its count of finished saves is read
    every_document_built(snapshot.documents)
    served.persist(str(root), snapshot)  # a call's: in the background, 0.3 s later
    served.persist(str(root), snapshot, now=True)  # the warm-up's: now
    assert cache.finished == 1
    timers = [t for t in threading.enumerate() if t.name == "bundle-mcp-parse-cache"]
    for timer in timers:
        timer.join(30)
    assert cache.finished == 1
    assert set(cache.load(str(root))) == {f"c{n}.md" for n in range(40)}
    # A save of more bodies than the last one still runs (the test above: the held one).


class _CountedSaves(ParseCache):
    """A parse cache that counts the saves it was asked for."""

    def __init__(self, directory: Path) -> None:
        super().__init__(directory)
        self.saves = 0

    def save(self, *args: Any, **kwargs: Any) -> None:
        self.saves += 1
        super().save(*args, **kwargs)


def _background_saves_done() -> None:
    for timer in [t for t in threading.enumerate() if t.name == "bundle-mcp-parse-cache"]:
        timer.join(30)


def test_a_restart_whose_documents_come_from_rows_starts_no_background_save(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Its first save would only look for rows to find none, holding the interpreter lock
    # against the calls a client makes right after a restart (about a second at 9,978 files).
    monkeypatch.setattr(snapshots, "PERSIST_DELAY_SECONDS", 0.0)
    root = _notes(tmp_path, 40)
    first = SnapshotCache(parse_cache=ParseCache(tmp_path / "cache"))
    snapshot = first.get(str(root), CancelToken())
    every_document_built(snapshot.documents)
    first.persist(str(root), snapshot, now=True)

    cache = _CountedSaves(tmp_path / "cache")
    restarted = SnapshotCache(parse_cache=cache)
    again = restarted.get(str(root), CancelToken())
    every_document_built(again.documents)  # every one from its row
    assert again.documents.work()["decoded"] == 40
    restarted.persist(str(root), again)
    _background_saves_done()
    assert cache.saves == 0
    # The warm-up's save still runs, and a document built from its file is saved at once.
    restarted.persist(str(root), again, now=True)
    assert cache.saves == 1

    (root / "c0.md").write_text("---\ntype: Note\ntitle: Changed\n---\n# C0\n")
    counted = _CountedSaves(tmp_path / "cache")
    changed = SnapshotCache(parse_cache=counted)
    edited = changed.get(str(root), CancelToken())
    assert edited.documents["c0.md"].fm["title"] == "Changed"
    changed.persist(str(root), edited)
    _background_saves_done()
    assert counted.saves == 1
