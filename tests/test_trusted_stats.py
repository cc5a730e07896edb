"""A restart trusts the stats an earlier process settled: it reads only the files it builds.

The parse cache keeps, beside each file's row, the stat the file had when its bytes were
captured, but only a *settled* one (the file had last changed well before the walk began:
git's "racily clean" rule, ``capture.SETTLE_NS``). The next process's walk takes a file with
the same stat to hold the row's bytes without reading or hashing it; its document reads the
bytes when it is built, and bytes that are not the row's are never used (``errors.FileMoved``:
the call is answered again from a new capture). Files in these tests were written a moment
ago, so the tests that need settled stats move the settle margin, never a clock.
"""

from __future__ import annotations

import importlib
import os
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from bundle_mcp.cancel import CancelToken
from bundle_mcp.dispatch import Dispatcher, ServeConfig
from bundle_mcp.errors import FileMoved
from bundle_mcp.loader import load_bundle
from bundle_mcp.loader.parse_cache import ParseCache
from bundle_mcp.snapshots import SnapshotCache
from toolcall import every_document_built

CONCEPTS = 60
# The module, not the function of the same name that bundle_mcp.loader exports.
capture_module = importlib.import_module("bundle_mcp.loader.capture")
loader_module = importlib.import_module("bundle_mcp.loader")


def _write_bundle(root: Path) -> None:
    (root / "index.md").write_text('---\nokf_version: "0.2"\n---\n# Bundle\n', encoding="utf-8")
    for n in range(CONCEPTS):
        folder = root / f"f{n % 3}"
        folder.mkdir(exist_ok=True)
        nxt = n + 1
        (folder / f"c{n}.md").write_text(
            f"---\ntype: Metric\ntitle: Concept {n}\n---\n# Concept {n}\n\n"
            f"See [next](/f{nxt % 3}/c{nxt}.md).\n",
            encoding="utf-8",
        )


@pytest.fixture()
def bundle(tmp_path: Path) -> Path:
    root = tmp_path / "bundle"
    root.mkdir()
    _write_bundle(root)
    return root


@pytest.fixture()
def settled(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every stat counts as settled (the files here changed a moment ago, not seconds ago)."""
    monkeypatch.setattr(capture_module, "SETTLE_NS", -60 * 10**9)


@pytest.fixture()
def reads(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The relative paths of the Markdown files read, in order."""
    seen: list[str] = []
    real: Callable[..., Any] = capture_module._read_file

    def counted(name: str, dir_fd: int, checked: os.stat_result, limit: int, path: str,
                seen_ns: int | None = None) -> Any:
        seen.append(path)
        return real(name, dir_fd, checked, limit, path, seen_ns)

    def counted_again(bundle_path: str, record: Any) -> Any:
        seen.append(record.path)  # a captured file's bytes read later (loader._reader)
        return real_again(bundle_path, record)

    real_again: Callable[..., Any] = loader_module._read_again
    monkeypatch.setattr(capture_module, "_read_file", counted)
    monkeypatch.setattr(loader_module, "_read_again", counted_again)
    yield seen


def _fill(bundle: Path, cache: Path) -> str:
    """Load, build every document and save it all with the capture's stats, as a server's
    warm-up would; the revision of that load."""
    snapshots = SnapshotCache(parse_cache=ParseCache(cache), watch=False)
    snapshot = snapshots.get(str(bundle), CancelToken())
    documents = every_document_built(snapshot.documents)
    ParseCache(cache).save(str(bundle), documents, snapshots._settled_stats(
        snapshots._slot(str(bundle)), snapshot))
    return snapshot.revision


def _restarted(bundle: Path, cache: Path) -> tuple[SnapshotCache, Dispatcher]:
    snapshots = SnapshotCache(parse_cache=ParseCache(cache), watch=False)
    return snapshots, Dispatcher(ServeConfig(bundles=(str(bundle),)), cache=snapshots)


def test_a_restart_reads_only_the_files_a_call_builds(
    bundle: Path, tmp_path: Path, settled: None, reads: list[str]
) -> None:
    revision = _fill(bundle, tmp_path / "cache")
    reads.clear()
    snapshots, dispatcher = _restarted(bundle, tmp_path / "cache")
    outcome = dispatcher.call("read_concept", {"concept_id": "f1/c10"})
    assert not outcome.is_error, outcome.structured
    snapshot = snapshots.get(str(bundle), CancelToken())
    assert snapshot.revision == revision  # the records come from the rows: the same revision
    built = {doc.path for doc in snapshot.documents.built()}
    # Each read when built, and again whenever the answer reads its text (packed_text.FileText).
    assert sorted(set(reads)) == sorted(built) == ["f1/c10.md", "f2/c11.md", "index.md"]
    assert snapshot.documents.work()["parsed"] == 0


def test_unsettled_stats_are_not_kept(
    bundle: Path, tmp_path: Path, reads: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Files that changed shortly before the walk may change again within their change time's
    tick: their stats are not saved, and the next process reads every file. (The files here
    changed a moment ago; a margin of a day keeps that so on a stalled machine too.)"""
    monkeypatch.setattr(capture_module, "SETTLE_NS", 86_400 * 10**9)
    _fill(bundle, tmp_path / "cache")
    rows = ParseCache(tmp_path / "cache").load(str(bundle))
    assert rows is not None and len(rows) == CONCEPTS + 1
    assert rows.trusted_stats() == {}
    reads.clear()
    snapshots, _ = _restarted(bundle, tmp_path / "cache")
    snapshots.get(str(bundle), CancelToken())
    assert len(reads) == CONCEPTS + 1


def test_a_file_changed_since_the_save_is_read(
    bundle: Path, tmp_path: Path, settled: None
) -> None:
    """Same size and the old modification time put back: the change time still differs, so
    the walk reads the file and the answer is the new one."""
    _fill(bundle, tmp_path / "cache")
    path = bundle / "f1" / "c10.md"
    before = path.stat()
    path.write_text(path.read_text(encoding="utf-8").replace("Concept 10", "Concept XX"),
                    encoding="utf-8")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert path.stat().st_size == before.st_size
    _, dispatcher = _restarted(bundle, tmp_path / "cache")
    outcome = dispatcher.call("read_concept", {"concept_id": "f1/c10"})
    assert not outcome.is_error, outcome.structured
    assert "title: Concept XX" in outcome.structured["frontmatter_yaml"]


def test_bytes_that_are_not_the_rows_are_never_used(
    bundle: Path, tmp_path: Path, settled: None
) -> None:
    _fill(bundle, tmp_path / "cache")
    rows = ParseCache(tmp_path / "cache").load(str(bundle))
    snapshot, _ = load_bundle(str(bundle), cached=rows)
    (bundle / "f1" / "c10.md").write_text("---\ntype: Metric\ntitle: Other\n---\n",
                                          encoding="utf-8")
    with pytest.raises(FileMoved) as moved:
        snapshot.documents["f1/c10.md"]
    assert moved.value.path == "f1/c10.md"
    assert moved.value.code == "operation_cancelled" and moved.value.retryable
    assert snapshot.documents["f2/c11.md"].frontmatter is not None  # the others still build


def test_a_call_that_meets_a_moved_file_is_answered_from_a_new_capture(
    bundle: Path, tmp_path: Path, settled: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The file changes after the capture trusted its stat and before the call builds it: the
    call captures again, reading that file, and answers with its new bytes."""
    _fill(bundle, tmp_path / "cache")
    snapshots, dispatcher = _restarted(bundle, tmp_path / "cache")
    target = bundle / "f1" / "c10.md"
    real_get = snapshots.get
    captures: list[str] = []

    def get_then_edit(bundle_path: str, token: CancelToken) -> Any:
        snapshot = real_get(bundle_path, token)
        captures.append(snapshot.revision)
        if len(captures) == 1:
            target.write_text("---\ntype: Metric\ntitle: Rewritten\n---\n# Rewritten\n",
                              encoding="utf-8")
        return snapshot

    monkeypatch.setattr(snapshots, "get", get_then_edit)
    outcome = dispatcher.call("read_concept", {"concept_id": "f1/c10"})
    assert not outcome.is_error, outcome.structured
    assert "title: Rewritten" in outcome.structured["frontmatter_yaml"]
    assert len(captures) == 2 and captures[0] != captures[1]


def test_a_bundle_that_keeps_moving_gets_a_retryable_cancellation(
    bundle: Path, tmp_path: Path, settled: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every attempt's capture holds a file whose bytes moved (here the same stale capture is
    handed back each time): after three attempts the call is cancelled, retryable."""
    _fill(bundle, tmp_path / "cache")
    snapshots, dispatcher = _restarted(bundle, tmp_path / "cache")
    stale = snapshots.get(str(bundle), CancelToken())
    target = bundle / "f1" / "c10.md"
    target.write_text(target.read_text(encoding="utf-8") + "\nMore.\n", encoding="utf-8")
    attempts: list[str] = []
    monkeypatch.setattr(snapshots, "get", lambda bundle_path, token: stale)
    monkeypatch.setattr(snapshots, "distrust", lambda bundle_path, path: attempts.append(path))
    outcome = dispatcher.call("read_concept", {"concept_id": "f1/c10"})
    assert outcome.is_error
    assert outcome.structured["code"] == "operation_cancelled"
    assert outcome.structured["retryable"] is True
    assert attempts == ["f1/c10.md"] * 3


def test_a_stats_row_without_its_documents_row_is_not_trusted(
    bundle: Path, tmp_path: Path, settled: None
) -> None:
    import sqlite3

    _fill(bundle, tmp_path / "cache")
    database = ParseCache(tmp_path / "cache").database(str(bundle))
    assert database is not None
    with sqlite3.connect(database) as db:
        db.execute("DELETE FROM documents WHERE path = 'f1/c10.md'")
        db.execute("UPDATE stats SET ino = 'x' WHERE path = 'f2/c11.md'")
    rows = ParseCache(tmp_path / "cache").load(str(bundle))
    assert rows is not None
    trusted = rows.trusted_stats()
    assert "f1/c10.md" not in trusted and "f2/c11.md" not in trusted
    assert len(trusted) == CONCEPTS - 1


def test_a_trusted_file_takes_the_row_its_stat_goes_with(
    bundle: Path, tmp_path: Path, settled: None, reads: list[str]
) -> None:
    """A path has two rows for a moment when another process saw other bytes. The record of a
    file its stat vouches for is that of the row the stat was kept beside, whichever row comes
    last: another row's record would give the snapshot a revision its bytes do not have."""
    revision = _fill(bundle, tmp_path / "cache")
    database = ParseCache(tmp_path / "cache").database(str(bundle))
    assert database is not None
    with sqlite3.connect(database) as db:
        size, entry = db.execute(
            "SELECT size, entry FROM documents WHERE path = 'f1/c10.md'").fetchone()
        # Sorts after any hex digest, so a load that took each path's last row would take it.
        db.execute("INSERT INTO documents(path, sha256, size, error, entry)"
                   " VALUES ('f1/c10.md', 'z-other-bytes', ?, NULL, ?)", (size, entry))
    rows = ParseCache(tmp_path / "cache").load(str(bundle))
    assert rows is not None and "f1/c10.md" in rows.trusted_stats()
    stored = rows.stored("f1/c10.md")
    assert stored is not None and stored.sha256 != "z-other-bytes"
    reads.clear()
    snapshots, dispatcher = _restarted(bundle, tmp_path / "cache")
    assert not dispatcher.call("read_concept", {"concept_id": "f1/c10"}).is_error
    assert snapshots.get(str(bundle), CancelToken()).revision == revision
    assert "f1/c10.md" in reads  # read when built, never captured: the stat was trusted


def _captured_unsettled(bundle: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
                        ) -> tuple[SnapshotCache, Any]:
    """A capture taken while every file had changed too recently to trust its stat, every
    document built; then the margin moved so that a stat taken from now on is settled (as
    seconds later, when the warm-up saves)."""
    monkeypatch.setattr(capture_module, "SETTLE_NS", 86_400 * 10**9)
    snapshots = SnapshotCache(parse_cache=ParseCache(cache), watch=False)
    snapshot = snapshots.get(str(bundle), CancelToken())
    every_document_built(snapshot.documents)
    monkeypatch.setattr(capture_module, "SETTLE_NS", -60 * 10**9)
    return snapshots, snapshot


def test_the_warm_up_save_trusts_the_stats_that_settled_since_the_capture(
    bundle: Path, tmp_path: Path, reads: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 29: a server started within seconds of its bundle being written (a clone, a copy)
    captured every stat unsettled, so no save kept one, and every restart read and hashed
    every file before its first answer. The warm-up's save reads those files again, stat
    first, and keeps the stats that are settled now and go with the same bytes."""
    snapshots, snapshot = _captured_unsettled(bundle, tmp_path / "cache", monkeypatch)
    reads.clear()
    snapshots.persist(str(bundle), snapshot, now=True)
    assert len(reads) == CONCEPTS + 1  # each file read again, once
    rows = ParseCache(tmp_path / "cache").load(str(bundle))
    assert rows is not None and len(rows.trusted_stats()) == CONCEPTS + 1
    # Kept with the capture: a later save (which writes exactly the stats it is given)
    # keeps them too.
    later = snapshots._settled_stats(snapshots._slot(str(bundle)), snapshot)
    assert len(later) == CONCEPTS + 1
    reads.clear()
    restarted, dispatcher = _restarted(bundle, tmp_path / "cache")
    assert not dispatcher.call("read_concept", {"concept_id": "f1/c10"}).is_error
    assert sorted(set(reads)) == ["f1/c10.md", "f2/c11.md", "index.md"]


def test_the_warm_up_save_never_trusts_a_file_changed_since_the_capture(
    bundle: Path, tmp_path: Path, reads: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    snapshots, snapshot = _captured_unsettled(bundle, tmp_path / "cache", monkeypatch)
    changed = bundle / "f1" / "c10.md"
    changed.write_text(changed.read_text(encoding="utf-8") + "Changed.\n", encoding="utf-8")
    (bundle / "f2" / "c11.md").unlink()
    snapshots.persist(str(bundle), snapshot, now=True)
    rows = ParseCache(tmp_path / "cache").load(str(bundle))
    assert rows is not None
    trusted = rows.trusted_stats()
    assert "f1/c10.md" not in trusted and "f2/c11.md" not in trusted
    assert len(trusted) == CONCEPTS - 1
    reads.clear()
    restarted, _ = _restarted(bundle, tmp_path / "cache")
    again = restarted.get(str(bundle), CancelToken())
    assert "f2/c11.md" not in again.documents
    assert again.documents["f1/c10.md"].text.endswith("Changed.\n")
