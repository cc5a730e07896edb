"""A file system that refuses one call, or every call from one on, at each step of an apply.

Every mutating system call the write path makes (opening for writing, write, fsync, rename,
link, unlink, rmdir, mkdir, fchmod) is counted during a clean three-file apply; then the apply is
repeated with the k-th of those calls failing, for every k and for each errno a real disk gives
(EACCES, EROFS, EIO, ENOSPC, ENAMETOOLONG), once ("once": a transient refusal) or from then on
("from_k": the disk turned read-only or failing). Whatever happens:

- the call ends with a receipt or a :class:`BundleError`, never another exception;
- every file is wholly old or wholly new at every moment;
- reads never fail because of a pending write: with the disk still failing, the bundle loads and
  validation reports the pending write as an ERROR with a recovery step;
- once the disk works again, the next load leaves the bundle exactly at its base or its result,
  with no journal and no staged or old-version file left in any folder.

A transient refusal additionally never leaves a third state behind the failed call: the bundle is
back at its base at once (or at its result when only clean-up after the commit was refused).
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from bundle_mcp.errors import ERROR, BundleError
from bundle_mcp.loader import PENDING_WRITE, load_bundle
from bundle_mcp.writes import PlannedWrite, apply_writes

if TYPE_CHECKING:
    from conftest import BundleFactory

DIGEST = "sha256:" + "a" * 64
OLD = {
    "index.md": b"# Root\n\n- [A](a.md)\n",
    "a.md": b"---\ntype: note\n---\n# A old\n",
    "keep.md": b"---\ntype: note\n---\n# untouched\n",
}
NEW = {
    "a.md": b"---\ntype: note\n---\n# A new\n",
    "new/deeper/c.md": b"---\ntype: note\n---\n# C\n",
    "index.md": b"# Root\n\n- [A](a.md)\n- [C](new/deeper/c.md)\n",
}
RESULT = {**OLD, **NEW}
ERRNOS = (errno.EACCES, errno.EROFS, errno.EIO, errno.ENOSPC, errno.ENAMETOOLONG)
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT
_MUTATING = ("write", "fsync", "replace", "rename", "link", "unlink", "rmdir", "mkdir", "fchmod")


def planned() -> tuple[PlannedWrite, ...]:
    return tuple(
        PlannedWrite(p, hashlib.sha256(OLD[p]).hexdigest() if p in OLD else None, data)
        for p, data in NEW.items()
    )


def on_disk(root: str) -> dict[str, bytes]:
    """Every file under ``root`` outside the state folder, dot-files included."""
    out: dict[str, bytes] = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".bundle-mcp"]
        for name in files:
            full = os.path.join(folder, name)
            out[os.path.relpath(full, root)] = Path(full).read_bytes()
    return out


def folders(root: str) -> set[str]:
    return {
        os.path.relpath(os.path.join(folder, d), root)
        for folder, dirs, _ in os.walk(root)
        for d in dirs
        if d != ".bundle-mcp"
    }


def journal_exists(root: str) -> bool:
    return os.path.exists(os.path.join(root, ".bundle-mcp", "journal.json"))


class Disk:
    """Counts the write path's mutating calls and fails the chosen ones with one errno."""

    def __init__(self, fail_at: int | None, code: int, from_then_on: bool) -> None:
        self.calls = 0
        self.fail_at = fail_at
        self.code = code
        self.from_then_on = from_then_on
        self.failed = 0

    def _tick(self) -> None:
        self.calls += 1
        if self.fail_at is None:
            return
        if self.calls == self.fail_at or (self.from_then_on and self.calls > self.fail_at):
            self.failed += 1
            raise OSError(self.code, os.strerror(self.code))

    def stop_failing(self) -> None:
        self.fail_at = None

    @contextmanager
    def installed(self, monkeypatch: pytest.MonkeyPatch) -> Iterator[Disk]:
        real_open = os.open

        def counted_open(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
            if flags & _WRITE_FLAGS:
                self._tick()
            return real_open(path, flags, *args, **kwargs)

        monkeypatch.setattr(os, "open", counted_open)
        for name in _MUTATING:
            monkeypatch.setattr(os, name, self._wrap(getattr(os, name)))
        try:
            yield self
        finally:
            monkeypatch.undo()

    def _wrap(self, real: Callable[..., Any]) -> Callable[..., Any]:
        def counted(*args: Any, **kwargs: Any) -> Any:
            self._tick()
            return real(*args, **kwargs)

        return counted


def revision(root: str) -> str:
    return "sha256:" + load_bundle(root)[0].revision


def pending_findings(root: str) -> list[str]:
    snapshot, _ = load_bundle(root)
    return [d.message for d in snapshot.skipped if d.code == PENDING_WRITE and d.severity == ERROR]


@pytest.fixture(scope="module")
def mutating_calls(tmp_path_factory: pytest.TempPathFactory) -> int:
    root = os.path.realpath(tmp_path_factory.mktemp("count"))
    for rel, data in OLD.items():
        Path(root, rel).write_bytes(data)
    base = revision(root)
    monkeypatch = pytest.MonkeyPatch()
    disk = Disk(None, 0, False)
    with disk.installed(monkeypatch):
        apply_writes(root, base, planned(), DIGEST, None)
    assert on_disk(root) == RESULT
    assert disk.calls > 20  # the apply really went through the counted calls
    return disk.calls


def wholly_old_or_new(root: str) -> None:
    files = on_disk(root)
    for path in RESULT:
        visible = files.get(path)
        assert visible in (OLD.get(path), NEW.get(path, OLD.get(path))), path


@pytest.mark.parametrize("code", ERRNOS, ids=[errno.errorcode[c] for c in ERRNOS])
@pytest.mark.parametrize("from_then_on", [False, True], ids=["once", "from_k"])
def test_a_refused_call_at_any_step_never_wedges_or_tears_the_bundle(
    tmp_bundle: BundleFactory,
    monkeypatch: pytest.MonkeyPatch,
    mutating_calls: int,
    code: int,
    from_then_on: bool,
) -> None:
    outcomes: set[str] = set()
    for k in range(1, mutating_calls + 1):
        root = tmp_bundle(OLD)
        base = revision(root)
        disk = Disk(k, code, from_then_on)
        with disk.installed(monkeypatch):
            try:
                receipt = apply_writes(root, base, planned(), DIGEST, None)
            except BundleError as exc:
                receipt = None
                assert exc.code == "operation_rejected", (k, exc.code, exc.message)
            assert disk.failed >= 1, k  # the fault really fired
            wholly_old_or_new(root)
            if from_then_on:
                # The disk is still failing: reads go on, and a stuck write is reported.
                snapshot, _ = load_bundle(root)
                assert set(snapshot.documents) <= set(RESULT)
                if journal_exists(root):
                    stuck = [d for d in snapshot.skipped if d.code == PENDING_WRITE]
                    assert stuck and stuck[0].severity == ERROR, k
                    assert "To recover:" in stuck[0].message
                with pytest.raises(BundleError):
                    apply_writes(root, base, planned(), "sha256:" + "b" * 64, None)
            disk.stop_failing()
        if not from_then_on:
            # A transient refusal is handled within the call: base on failure, result on success.
            expected = OLD if receipt is None else RESULT
            visible = {p: d for p, d in on_disk(root).items() if ".bundle-mcp-" not in p}
            assert visible == expected, k
        # The disk works again: the next load finishes or undoes whatever was left.
        after = revision(root)
        assert not journal_exists(root), k
        assert pending_findings(root) == []
        files = on_disk(root)
        assert files in (OLD, RESULT), (k, sorted(files))  # no staged or old-version file left
        if files == OLD:
            assert "new" not in folders(root), k
            assert after == base
            outcomes.add("undone")
        else:
            outcomes.add("completed")
        if receipt is not None:
            assert files == RESULT and after == receipt.result_revision, k
    # Faults before the commit undo the write; faults in the clean-up after it never do.
    assert outcomes == {"undone", "completed"}


def test_a_rename_the_file_system_refuses_is_undone_at_once(
    tmp_bundle: BundleFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The original wedge: the last rename fails with ENAMETOOLONG after others succeeded."""
    root = tmp_bundle(OLD)
    base = revision(root)
    real_replace = os.replace

    def refusing(src: Any, dst: Any, **kwargs: Any) -> None:
        if dst == "index.md":  # published last, after a.md and new/deeper/c.md
            raise OSError(errno.ENAMETOOLONG, os.strerror(errno.ENAMETOOLONG))
        real_replace(src, dst, **kwargs)

    monkeypatch.setattr(os, "replace", refusing)
    with pytest.raises(BundleError) as caught:
        apply_writes(root, base, planned(), DIGEST, None)
    monkeypatch.undo()
    assert caught.value.code == "operation_rejected"
    assert "undone" in caught.value.message
    assert on_disk(root) == OLD
    assert not journal_exists(root)
    assert "new" not in folders(root)
    assert revision(root) == base
    receipt = apply_writes(root, base, planned(), DIGEST, None)  # the same call now succeeds
    assert on_disk(root) == RESULT and receipt.result_revision == revision(root)


def test_a_damaged_journal_is_reported_and_never_blocks_reads(tmp_bundle: BundleFactory) -> None:
    root = tmp_bundle(OLD)
    state = Path(root, ".bundle-mcp")
    state.mkdir()
    (state / "journal.json").write_text("{not json")
    snapshot, _ = load_bundle(root)
    assert set(snapshot.documents) == set(OLD)
    [stuck] = [d for d in snapshot.skipped if d.code == PENDING_WRITE]
    assert stuck.severity == ERROR and stuck.file == ".bundle-mcp/journal.json"
    with pytest.raises(BundleError) as caught:
        apply_writes(root, revision(root), planned(), DIGEST, None)
    assert caught.value.code == "operation_rejected"
    assert on_disk(root) == OLD


def test_a_bundle_wedged_by_an_earlier_version_recovers_on_the_next_load(
    tmp_bundle: BundleFactory,
) -> None:
    """The journal an earlier release left for a file name over 255 bytes is undone."""
    root = tmp_bundle(OLD)
    long_name = "b" * 253 + ".md"
    staged = "..bundle-mcp-d577b0d898cf-1535159bef2e992f.tmp"
    Path(root, "newdir").mkdir()
    Path(root, "newdir", staged).write_bytes(b"---\ntype: Note\n---\nx\n")
    state = Path(root, ".bundle-mcp")
    state.mkdir()
    (state / "lock").write_bytes(b"")
    journal = {
        "version": 1,
        "state": "publishing",
        "request_digest": "sha256:" + "d577b0d898cf" + "0" * 52,
        "base_revision": "sha256:" + "1" * 64,
        "result_revision": "sha256:" + "2" * 64,
        "entries": [
            {
                "path": "newdir/" + long_name,
                "old_sha256": None,
                "new_sha256": hashlib.sha256(b"---\ntype: Note\n---\nx\n").hexdigest(),
                "staged": staged,
            }
        ],
        "created_dirs": ["newdir"],
    }
    (state / "journal.json").write_text(json.dumps(journal))
    snapshot, _ = load_bundle(root)
    assert [d for d in snapshot.skipped if d.code == PENDING_WRITE] == []
    assert on_disk(root) == OLD and folders(root) == set()
    assert not journal_exists(root)
