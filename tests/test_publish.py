"""The publication layer: compare-and-swap, atomicity, replay, no escape, and crash recovery.

The fault-injection test kills a real subprocess (SIGKILL) at every step of a three-file apply
and checks that recovery leaves the bundle exactly at its base or at its result (docs/DESIGN.md §5).
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from bundle_mcp.cancel import CancelToken
from bundle_mcp.errors import (
    OPERATION_CANCELLED,
    OPERATION_REJECTED,
    RESOURCE_LIMIT,
    REVISION_CONFLICT,
    BundleError,
)
from bundle_mcp.loader import load_bundle
from bundle_mcp.loader.capture import MAX_FILE_BYTES
from bundle_mcp.model import canonical_json
from bundle_mcp.storage.handles import pin_root
from bundle_mcp.storage.journal import (
    STAGING,
    Entry,
    Journal,
    backup_name,
    read_journal,
    staged_name,
    write_journal,
)
from bundle_mcp.storage.recovery import recover
from bundle_mcp.writes import PlannedWrite, apply_writes

if TYPE_CHECKING:  # fixtures' types only; pytest provides the objects
    from conftest import BundleFactory

DIGEST = "sha256:" + "d" * 64
OTHER_DIGEST = "sha256:" + "e" * 64

OLD = {
    "index.md": b"# Root\n\n- [A](a.md)\n",
    "a.md": b"---\ntype: note\n---\n# A old\n",
    "keep.md": b"---\ntype: note\n---\n# untouched\n",
}
NEW = {
    "a.md": b"---\ntype: note\n---\n# A new\n",
    "new/c.md": b"---\ntype: note\n---\n# C\n",
    "index.md": b"# Root\n\n- [A](a.md)\n- [C](new/c.md)\n",
}
STEPS = (
    "locked",
    "journal_written",
    "staged:a.md",
    "staged:new/c.md",
    "staged:index.md",
    "publishing",
    "replaced:a.md",
    "replaced:new/c.md",
    "replaced:index.md",
    "receipt_written",
    "done",
)
ROLLS_FORWARD = STEPS[STEPS.index("publishing") :]


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def planned(
    changes: dict[str, bytes] = NEW, old: dict[str, bytes] = OLD
) -> tuple[PlannedWrite, ...]:
    return tuple(
        PlannedWrite(path, sha(old[path]) if path in old else None, data)
        for path, data in changes.items()
    )


def tree_bytes(root: str) -> dict[str, bytes]:
    """Every file and symlink under ``root`` except the write state folder."""
    out: dict[str, bytes] = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".bundle-mcp"]
        for name in files + [d for d in dirs if os.path.islink(os.path.join(folder, d))]:
            full = os.path.join(folder, name)
            rel = os.path.relpath(full, root)
            out[rel] = (
                b"->" + os.readlink(full).encode()
                if os.path.islink(full)
                else Path(full).read_bytes()
            )
    return out


def folders(root: str) -> set[str]:
    return {
        os.path.relpath(os.path.join(folder, d), root)
        for folder, dirs, _ in os.walk(root)
        for d in dirs
        if d != ".bundle-mcp"
    }


def loader_revision(root: str) -> str:
    return "sha256:" + load_bundle(root)[0].revision


@pytest.fixture
def bundle(tmp_bundle: BundleFactory) -> str:
    return tmp_bundle(OLD)


@pytest.fixture
def result_revision(tmp_bundle: BundleFactory) -> str:
    """The revision of the bundle after NEW is applied, from a bundle written directly."""
    return loader_revision(tmp_bundle({**OLD, **NEW}))


# ---------------------------------------------------------------------------- success, replay


def test_apply_publishes_every_file_and_predicts_the_loader_revision(
    bundle: str, result_revision: str
) -> None:
    base = loader_revision(bundle)
    assert base == loader_revision(bundle)
    receipt = apply_writes(bundle, base, planned(), DIGEST, CancelToken())
    assert receipt.base_revision == base
    assert receipt.result_revision == result_revision == loader_revision(bundle)
    assert receipt.changed_paths == ("a.md", "index.md", "new/c.md")
    assert not receipt.replayed
    assert tree_bytes(bundle) == {**OLD, **NEW}
    assert not os.path.exists(os.path.join(bundle, ".bundle-mcp", "journal.json"))


def test_publish_order_is_sorted_with_the_root_index_last(bundle: str) -> None:
    steps: list[str] = []
    apply_writes(
        bundle, loader_revision(bundle), planned(), DIGEST, None, step_hook=steps.append
    )
    assert steps == list(STEPS)


def test_identical_apply_replays_its_receipt_without_writing(bundle: str) -> None:
    base = loader_revision(bundle)
    first = apply_writes(bundle, base, planned(), DIGEST, None)
    before = {p: os.stat(os.path.join(bundle, p)).st_ino for p in NEW}
    steps: list[str] = []
    again = apply_writes(bundle, base, planned(), DIGEST, None, step_hook=steps.append)
    assert again.replayed
    assert (again.base_revision, again.result_revision, again.changed_paths) == (
        first.base_revision,
        first.result_revision,
        first.changed_paths,
    )
    assert steps == ["locked"]
    assert {p: os.stat(os.path.join(bundle, p)).st_ino for p in NEW} == before


def test_writing_the_current_bytes_is_a_noop(bundle: str) -> None:
    base = loader_revision(bundle)
    same = (PlannedWrite("a.md", sha(OLD["a.md"]), OLD["a.md"]),)
    receipt = apply_writes(bundle, base, same, DIGEST, None)
    assert (receipt.result_revision, receipt.changed_paths) == (base, ())
    assert tree_bytes(bundle) == OLD


def test_the_kept_file_mode_survives_a_replacement(bundle: str) -> None:
    os.chmod(os.path.join(bundle, "a.md"), 0o600)
    apply_writes(bundle, loader_revision(bundle), planned(), DIGEST, None)
    assert os.stat(os.path.join(bundle, "a.md")).st_mode & 0o777 == 0o600


# ---------------------------------------------------------------------------- compare-and-swap


def test_stale_base_revision_is_a_conflict_and_changes_nothing(bundle: str) -> None:
    base = loader_revision(bundle)
    Path(bundle, "keep.md").write_bytes(b"---\ntype: note\n---\nedited elsewhere\n")
    before = tree_bytes(bundle)
    with pytest.raises(BundleError) as caught:
        apply_writes(bundle, base, planned(), DIGEST, None)
    assert caught.value.code == REVISION_CONFLICT
    assert any(d.code == "recovery_step" for d in caught.value.diagnostics)
    assert tree_bytes(bundle) == before


@pytest.mark.parametrize(
    "write",
    [
        PlannedWrite("a.md", "0" * 64, b"x"),  # the file holds other bytes
        PlannedWrite("a.md", None, b"x"),  # expected absent, but it exists
        PlannedWrite("gone.md", "0" * 64, b"x"),  # expected present, but it is absent
    ],
    ids=["other-bytes", "exists", "absent"],
)
def test_a_target_not_holding_the_expected_bytes_is_a_conflict(
    bundle: str, write: PlannedWrite
) -> None:
    with pytest.raises(BundleError) as caught:
        apply_writes(bundle, loader_revision(bundle), (write,), DIGEST, None)
    assert caught.value.code == REVISION_CONFLICT
    assert tree_bytes(bundle) == OLD


def test_racing_applies_on_one_base_let_exactly_one_win(bundle: str) -> None:
    base = loader_revision(bundle)
    barrier = threading.Barrier(2)
    outcomes: list[str] = []
    lock = threading.Lock()

    def attempt(text: bytes, digest: str) -> None:
        barrier.wait(timeout=10)
        try:
            apply_writes(
                bundle, base, (PlannedWrite("a.md", sha(OLD["a.md"]), text),), digest, None
            )
            outcome = "won"
        except BundleError as exc:
            outcome = exc.code
        with lock:
            outcomes.append(outcome)

    threads = [
        threading.Thread(target=attempt, args=(b"---\ntype: one\n---\n", DIGEST)),
        threading.Thread(target=attempt, args=(b"---\ntype: two\n---\n", OTHER_DIGEST)),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert sorted(outcomes) == sorted(["won", REVISION_CONFLICT])
    assert Path(bundle, "a.md").read_bytes() in (b"---\ntype: one\n---\n", b"---\ntype: two\n---\n")


# ---------------------------------------------------------------------------- never escape


@pytest.mark.parametrize(
    "path",
    [
        "../x.md",
        "/tmp/x.md",
        "a/../../x.md",
        "./a.md",
        "a//b.md",
        ".bundle-mcp/receipts/x.md",
        ".hidden.md",
        "dir/.x.md",
        "x.txt",
        "",
        "a\\b.md",
        "a\x00.md",
    ],
)
def test_paths_outside_the_visible_bundle_are_rejected(bundle: str, path: str) -> None:
    with pytest.raises(BundleError) as caught:
        apply_writes(
            bundle, loader_revision(bundle), (PlannedWrite(path, None, b"x"),), DIGEST, None
        )
    assert caught.value.code == OPERATION_REJECTED
    assert tree_bytes(bundle) == OLD
    assert not os.path.exists(os.path.join(os.path.dirname(bundle), "x.md"))


def test_a_symlinked_target_is_rejected_and_its_target_untouched(
    bundle: str, tmp_path: Path
) -> None:
    outside = tmp_path / "outside.md"
    outside.write_bytes(b"secret\n")
    os.symlink(outside, os.path.join(bundle, "link.md"))
    for old in (None, sha(b"secret\n")):
        with pytest.raises(BundleError) as caught:
            apply_writes(
                bundle,
                loader_revision(bundle),
                (PlannedWrite("link.md", old, b"---\ntype: x\n---\n"),),
                DIGEST,
                None,
            )
        assert caught.value.code == OPERATION_REJECTED
    assert outside.read_bytes() == b"secret\n"
    assert os.path.islink(os.path.join(bundle, "link.md"))


def test_a_symlinked_parent_folder_is_rejected_and_nothing_written_outside(
    bundle: str, tmp_path: Path
) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    os.symlink(outside, os.path.join(bundle, "sub"))
    for path in ("sub/x.md", "sub/deeper/x.md"):
        with pytest.raises(BundleError) as caught:
            apply_writes(
                bundle,
                loader_revision(bundle),
                (PlannedWrite(path, None, b"---\ntype: x\n---\n"),),
                DIGEST,
                None,
            )
        assert caught.value.code == OPERATION_REJECTED
    assert list(outside.iterdir()) == []


def test_a_symlinked_state_folder_is_rejected(bundle: str, tmp_path: Path) -> None:
    outside = tmp_path / "state"
    outside.mkdir()
    os.symlink(outside, os.path.join(bundle, ".bundle-mcp"))
    with pytest.raises(BundleError) as caught:
        apply_writes(bundle, loader_revision(bundle), planned(), DIGEST, None)
    assert caught.value.code == OPERATION_REJECTED
    assert list(outside.iterdir()) == []
    assert tree_bytes(bundle) == OLD


def test_a_path_excluded_by_okfignore_is_rejected(tmp_bundle: BundleFactory) -> None:
    root = tmp_bundle({**OLD, ".okfignore": "drafts/\n"})
    with pytest.raises(BundleError) as caught:
        apply_writes(
            root,
            loader_revision(root),
            (PlannedWrite("drafts/x.md", None, b"---\ntype: x\n---\n"),),
            DIGEST,
            None,
        )
    assert caught.value.code == OPERATION_REJECTED
    assert not os.path.exists(os.path.join(root, "drafts"))


def test_a_file_over_the_loader_cap_is_a_resource_limit(bundle: str) -> None:
    big = PlannedWrite("big.md", None, b"x" * (MAX_FILE_BYTES + 1))
    with pytest.raises(BundleError) as caught:
        apply_writes(bundle, loader_revision(bundle), (big,), DIGEST, None)
    assert caught.value.code == RESOURCE_LIMIT
    assert tree_bytes(bundle) == OLD


# ---------------------------------------------------------------------------- refusals, cancel


def test_a_full_disk_while_staging_rolls_back_and_leaves_the_bundle_intact(
    bundle: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_write = os.write

    def refusing_write(fd: int, data: bytes) -> int:
        # fail on the second staged file, after the first is already staged and new/ exists
        if bytes(data) == NEW["new/c.md"]:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write(fd, data)

    base = loader_revision(bundle)
    monkeypatch.setattr(os, "write", refusing_write)
    with pytest.raises(BundleError) as caught:
        apply_writes(bundle, base, planned(), DIGEST, None)
    monkeypatch.undo()
    assert caught.value.code == OPERATION_REJECTED
    assert "ENOSPC" in caught.value.message
    assert tree_bytes(bundle) == OLD  # no staged dot-files left either
    assert "new" not in folders(bundle)
    assert loader_revision(bundle) == base
    assert not os.path.exists(os.path.join(bundle, ".bundle-mcp", "journal.json"))


def test_a_full_disk_while_journaling_changes_nothing(
    bundle: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refusing_write(fd: int, data: bytes) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    base = loader_revision(bundle)
    monkeypatch.setattr(os, "write", refusing_write)
    with pytest.raises(BundleError) as caught:
        apply_writes(bundle, base, planned(), DIGEST, None)
    monkeypatch.undo()
    assert caught.value.code == OPERATION_REJECTED
    assert tree_bytes(bundle) == OLD
    assert os.listdir(os.path.join(bundle, ".bundle-mcp")) == ["lock"]


def test_cancelling_before_publishing_rolls_back(bundle: str) -> None:
    token = CancelToken()

    def cancel_at(step: str) -> None:
        if step == "staged:index.md":
            token.cancel()

    base = loader_revision(bundle)
    with pytest.raises(BundleError) as caught:
        apply_writes(bundle, base, planned(), DIGEST, token, step_hook=cancel_at)
    assert caught.value.code == OPERATION_CANCELLED
    assert tree_bytes(bundle) == OLD
    assert "new" not in folders(bundle)


def test_cancelling_once_publishing_began_still_finishes(bundle: str) -> None:
    token = CancelToken()

    def cancel_at(step: str) -> None:
        if step == "publishing":
            token.cancel()

    receipt = apply_writes(
        bundle, loader_revision(bundle), planned(), DIGEST, token, step_hook=cancel_at
    )
    assert tree_bytes(bundle) == {**OLD, **NEW}
    assert receipt.result_revision == loader_revision(bundle)


def test_recovery_waits_for_a_live_apply_instead_of_rolling_it_back(bundle: str) -> None:
    staged = threading.Event()
    release = threading.Event()
    recovered = threading.Event()

    def pause_at(step: str) -> None:
        if step == "staged:a.md":
            staged.set()
            assert release.wait(timeout=10)

    writer = threading.Thread(
        target=apply_writes,
        args=(bundle, loader_revision(bundle), planned(), DIGEST, None),
        kwargs={"step_hook": pause_at},
    )
    writer.start()
    assert staged.wait(timeout=10)

    def reader() -> None:
        fd = pin_root(bundle)
        try:
            recover(fd)
        finally:
            os.close(fd)
        recovered.set()

    recovering = threading.Thread(target=reader)
    recovering.start()
    assert not recovered.wait(timeout=0.3)  # blocked on the writer's lock, not rolling back
    release.set()
    writer.join(timeout=10)
    recovering.join(timeout=10)
    assert recovered.is_set()
    assert tree_bytes(bundle) == {**OLD, **NEW}


# ---------------------------------------------------------------------------- fault injection

CRASHING_APPLY = r"""
import json, os, signal, sys
from bundle_mcp.writes import PlannedWrite, apply_writes

root, base, digest, step, spec = sys.argv[1:6]
writes = tuple(
    PlannedWrite(w["path"], w["old"], None if w["new"] is None else w["new"].encode("utf-8"))
    for w in json.loads(spec)
)

def hook(name):
    if name == step:
        os.kill(os.getpid(), signal.SIGKILL)

apply_writes(root, base, writes, digest, None, step_hook=hook)
sys.exit(3)  # the step never fired
"""


@pytest.mark.parametrize("step", STEPS)
def test_a_crash_at_any_step_recovers_to_exactly_the_base_or_the_result(
    bundle: str, result_revision: str, step: str
) -> None:
    base = loader_revision(bundle)
    spec = json.dumps(
        [{"path": w.path, "old": w.old_sha256, "new": w.new_bytes.decode()} for w in planned()]
    )
    done = subprocess.run(
        [sys.executable, "-c", CRASHING_APPLY, bundle, base, DIGEST, step, spec],
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr.decode()

    # Before recovery: every file is wholly old or wholly new, never torn.
    for path, new in NEW.items():
        target = Path(bundle, path)
        assert (target.read_bytes() if target.exists() else None) in (OLD.get(path), new)

    fd = pin_root(bundle)  # recover exactly as the loader does
    try:
        recover(fd)
    finally:
        os.close(fd)
    revision = loader_revision(bundle)
    state = os.listdir(os.path.join(bundle, ".bundle-mcp"))
    assert "journal.json" not in state
    if step in ROLLS_FORWARD:
        assert revision == result_revision
        assert tree_bytes(bundle) == {**OLD, **NEW}
        again = apply_writes(bundle, base, planned(), DIGEST, None)
        assert again.replayed and again.result_revision == result_revision
    else:
        assert revision == base
        assert tree_bytes(bundle) == OLD  # no staged dot-files left behind
        assert "new" not in folders(bundle)
        retry = apply_writes(bundle, base, planned(), DIGEST, None)
        assert not retry.replayed and retry.result_revision == result_revision


# A rename as bundle edits publish it: the old file deleted, the new one created, a referrer
# rewritten (the root index.md last).
MOVED = {
    "keep.md": None,
    "moved/keep.md": OLD["keep.md"],
    "index.md": b"# Root\n\n- [A](a.md)\n- [Keep](moved/keep.md)\n",
}
MOVE_STEPS = (
    "locked",
    "journal_written",
    "staged:keep.md",
    "staged:moved/keep.md",
    "staged:index.md",
    "publishing",
    "deleted:keep.md",
    "replaced:moved/keep.md",
    "replaced:index.md",
    "receipt_written",
    "done",
)


def moved_tree() -> dict[str, bytes]:
    after: dict[str, bytes | None] = {**OLD, **MOVED}
    return {path: data for path, data in after.items() if data is not None}


@pytest.mark.parametrize("step", MOVE_STEPS)
def test_a_crash_at_any_step_of_a_move_recovers_to_exactly_the_base_or_the_result(
    bundle: str, tmp_bundle: BundleFactory, step: str
) -> None:
    """Deletions join the protocol: killed at any step, a deleted file is wholly there (old)
    or wholly gone, and recovery leaves exactly the base or the result."""
    base = loader_revision(bundle)
    result = loader_revision(tmp_bundle(moved_tree()))
    spec = json.dumps([
        {"path": path, "old": sha(OLD[path]) if path in OLD else None,
         "new": None if data is None else data.decode()}
        for path, data in MOVED.items()
    ])
    done = subprocess.run(
        [sys.executable, "-c", CRASHING_APPLY, bundle, base, DIGEST, step, spec],
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr.decode()
    for path, new in MOVED.items():  # before recovery: never torn
        target = Path(bundle, path)
        assert (target.read_bytes() if target.exists() else None) in (OLD.get(path), new)
    fd = pin_root(bundle)
    try:
        recover(fd)
    finally:
        os.close(fd)
    assert "journal.json" not in os.listdir(os.path.join(bundle, ".bundle-mcp"))
    if step in MOVE_STEPS[MOVE_STEPS.index("publishing"):]:
        assert loader_revision(bundle) == result
        assert tree_bytes(bundle) == moved_tree()
    else:
        assert loader_revision(bundle) == base
        assert tree_bytes(bundle) == OLD
        assert "moved" not in folders(bundle)


def test_a_deletion_of_a_file_changed_since_is_a_conflict(bundle: str) -> None:
    """A deletion names the bytes it deletes: a file edited since is never deleted."""
    base = loader_revision(bundle)
    Path(bundle, "keep.md").write_bytes(b"---\ntype: note\n---\n# edited\n")
    with pytest.raises(BundleError) as info:
        apply_writes(bundle, base, (PlannedWrite("keep.md", sha(OLD["keep.md"]), None),),
                     DIGEST, None)
    assert info.value.code == REVISION_CONFLICT
    assert Path(bundle, "keep.md").read_bytes() == b"---\ntype: note\n---\n# edited\n"


def test_the_journal_on_disk_is_canonical_json(tmp_path: Path) -> None:
    """Storage spells out its own encoding; a pending journal must stay readable bytes for bytes
    as the write path wrote it before storage got its own module (sorted keys, no whitespace,
    one newline)."""
    entry = Entry("dir/é.md", "a" * 64, "b" * 64, staged_name("dir/é.md", DIGEST),
                  backup_name("dir/é.md", DIGEST))
    journal = Journal(STAGING, DIGEST, DIGEST, DIGEST, (entry,), ("dir",))
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        write_journal(fd, journal)
        assert read_journal(fd) == journal
    finally:
        os.close(fd)
    on_disk = (tmp_path / "journal.json").read_bytes()
    assert on_disk == canonical_json(journal.to_json()).encode("utf-8") + b"\n"
