"""Finish or undo an interrupted apply, so the bundle is exactly its base or its result.

A ``staging`` journal is rolled back; a ``publishing`` one is rolled forward, and when that
fails, marked ``rolling_back`` and undone from the old versions kept beside each target. Neither
direction ever blocks readers: a journal that can be neither completed nor undone is reported
(:class:`RecoveryFailed`) and the loader serves the files as they are, each wholly old or wholly
new. The write path publishes through :func:`finish` too, so a publication that fails in its own
process is undone by the same code that recovers it after a crash.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Callable

from ..cancel import CancelToken
from ..errors import OPERATION_REJECTED, BundleError, recovery_step
from .handles import READ_FLAGS, Tree, fsync_dir, read_all, sha256_hex, split_path
from .journal import (
    PUBLISHING,
    STAGING,
    Entry,
    Journal,
    delete_journal,
    read_journal,
    write_journal,
)
from .locks import LockRefused, WriteLock
from .receipts import write_receipt
from .refusals import reason, rejected
from .state_dir import JOURNAL_FILE, MAX_STATE_FILE_BYTES, STATE_DIR, open_state_dir

__all__ = [
    "RecoveryFailed",
    "StepHook",
    "finish",
    "no_step",
    "pending",
    "recover",
    "recover_locked",
    "roll_back",
    "roll_forward",
]

StepHook = Callable[[str], None]


def no_step(_name: str) -> None:
    """The default step hook: nothing happens between steps."""


def pending(root_fd: int) -> bool:
    """Cheap check (two stats) for a journal left by an interrupted apply.

    A ``.bundle-mcp`` that is not a real folder (a symlink) holds no journal of ours; it is not
    followed here, and an apply refuses it.
    """
    try:
        if not stat.S_ISDIR(os.lstat(STATE_DIR, dir_fd=root_fd).st_mode):
            return False
        os.stat(f"{STATE_DIR}/{JOURNAL_FILE}", dir_fd=root_fd, follow_symlinks=False)
    except OSError:
        return False
    return True


class RecoveryFailed(BundleError):
    """A pending apply that could be neither completed nor undone (``operation_rejected``).

    Readers carry on with the files as they are; writers are refused until it is resolved.
    """

    def __init__(self, message: str, step: str) -> None:
        super().__init__(OPERATION_REJECTED, message, (recovery_step(step),))


_MANUAL_STEP = (
    "make the bundle folder writable again (disk space, permissions, a read-write mount); the "
    "next call then finishes or undoes the write by itself. To resolve it by hand, restore each "
    "file named in .bundle-mcp/journal.json from its '.old' copy beside it, then delete that "
    "journal"
)


def recover(root_fd: int, token: CancelToken | None = None) -> None:
    """Finish or undo an interrupted apply, so the bundle is exactly its base or its result.

    Takes the write lock first: a journal that belongs to a live apply in another process is
    waited for, never rolled back under its feet.

    Raises:
        RecoveryFailed: the pending apply can be neither completed nor undone (a read-only or
            failing disk, a damaged journal).
        BundleError: ``operation_cancelled`` when the wait for a running apply was cancelled or
            timed out; ``operation_rejected`` when the state folder itself cannot be opened.
    """
    if not pending(root_fd):
        return
    state_fd = open_state_dir(root_fd, create=False)
    if state_fd is None:
        return
    try:
        try:
            lock = WriteLock(state_fd, token)
            lock.__enter__()
        except LockRefused:
            # A state folder that cannot open its lock for writing (a read-only mount, a failing
            # disk) still has its journal looked at, and reported, under the shared lock.
            lock = WriteLock(state_fd, token, shared=True)
            lock.__enter__()
        try:
            recover_locked(root_fd, state_fd)
        finally:
            lock.__exit__()
    finally:
        os.close(state_fd)


def recover_locked(root_fd: int, state_fd: int) -> None:
    """:func:`recover` for a caller that already holds the lock."""
    try:
        journal = read_journal(state_fd)
    except (OSError, ValueError):
        raise RecoveryFailed(
            "the bundle has a pending write whose journal cannot be read; reads serve the files "
            "as they are, writes are refused",
            _MANUAL_STEP,
        ) from None
    if journal is None:
        return
    with Tree(root_fd) as tree:
        try:
            finish(tree, state_fd, journal)
        except (OSError, BundleError) as exc:
            raise RecoveryFailed(
                f"an interrupted write to the bundle can be neither completed nor undone "
                f"({reason(exc)}); reads serve the files as they are, writes are refused",
                _MANUAL_STEP,
            ) from None
    if _present(state_fd, JOURNAL_FILE):  # the clean-up after a commit could not finish
        raise RecoveryFailed(
            "a finished write's journal cannot be removed from .bundle-mcp/ (the disk refuses "
            "changes); every file is at its new version, writes are refused",
            _MANUAL_STEP,
        )


def finish(
    tree: Tree, state_fd: int, journal: Journal, hook: StepHook = no_step, *, verify: bool = True
) -> bool:
    """Complete or undo ``journal``; True when the apply ended published, False when undone.

    ``verify=False`` only for the apply that staged the files in this process (it knows them).

    ``publishing`` is rolled forward, and when that fails, marked ``rolling_back`` and undone:
    once an undo has begun it is only ever finished, because a file it already restored would
    look like one that never needed publishing.

    Raises:
        OSError, BundleError: neither direction could be completed; the journal stays, in a
            state from which the next attempt goes on safely.
    """
    if journal.state == STAGING:
        roll_back(tree, state_fd, journal)
        return False
    if journal.state == PUBLISHING:
        try:
            roll_forward(tree, state_fd, journal, hook, verify=verify)
        except (OSError, BundleError):
            journal = journal.rolling_back()
            write_journal(state_fd, journal)  # if even this fails, "publishing" stays the truth
        else:
            return True
    roll_back(tree, state_fd, journal)
    return False


def roll_back(tree: Tree, state_fd: int, journal: Journal) -> None:
    """Undo an apply: restore published files from their old versions, delete every staged file
    and old version, the created folders, then the journal.

    Only a target that still holds exactly the bytes this apply published is restored (or, for a
    file the apply created, removed), and a deleted file is put back only while its name is
    free: a file edited or created since is never overwritten.
    """
    published = journal.state != STAGING
    for entry in reversed(journal.entries):
        parent, name = split_path(entry.path)
        dir_fd = tree.directory(parent)
        if dir_fd is None:
            continue
        if published and entry.new_sha256 is None:
            # a deletion: put the old version back unless its name was taken again meanwhile
            if (entry.backup is not None and _present(dir_fd, entry.backup)
                    and not _exists(dir_fd, name)):
                os.replace(entry.backup, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        elif (published and entry.new_sha256 is not None
              and _holds(dir_fd, name, entry.new_sha256)):
            if entry.backup is not None and _present(dir_fd, entry.backup):
                os.replace(entry.backup, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            elif entry.old_sha256 is None:
                os.unlink(name, dir_fd=dir_fd)
            else:
                raise rejected(f"the old version of {entry.path} is missing; it cannot be undone")
        for leftover in (entry.staged, entry.backup):
            if leftover is not None:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(leftover, dir_fd=dir_fd)
        fsync_dir(dir_fd)
    for folder in reversed(journal.created_dirs):
        parent, name = split_path(folder)
        parent_fd = tree.directory(parent)
        if parent_fd is None:
            continue
        try:
            os.rmdir(name, dir_fd=parent_fd)
        except FileNotFoundError:
            continue
        except OSError as exc:
            if exc.errno in (errno.ENOTEMPTY, errno.EEXIST):
                continue  # a folder that meanwhile holds anything else is not ours to remove
            raise
        fsync_dir(parent_fd)
    tree.forget(journal.created_dirs)
    delete_journal(state_fd)


def roll_forward(
    tree: Tree, state_fd: int, journal: Journal, hook: StepHook = no_step, *, verify: bool
) -> None:
    """Publishing had begun: rename every staged file that is still there over its target, and
    unlink every target the apply deletes that still holds its old version.

    Staged files were fsynced before the journal said ``publishing``, so each one is complete;
    ``verify`` (recovery) still checks its hash, so a damaged stage is never published. Once
    every rename is done the apply is committed: what follows (old versions deleted, receipt,
    journal removed) is clean-up that never undoes it, and what of it fails is retried by the
    next recovery, which finds nothing left to rename.

    Raises:
        OSError, BundleError: a rename failed (or a stage is damaged): not committed.
    """
    for entry in journal.entries:
        parent, name = split_path(entry.path)
        dir_fd = tree.directory(parent)
        if dir_fd is None:
            raise rejected(f"the folder of {entry.path} vanished during the write")
        if entry.staged is None:
            # a deletion; its old version stays beside it until the clean-up. A file that holds
            # anything else was written there since, and is not this apply's to delete.
            if entry.old_sha256 is not None and _holds(dir_fd, name, entry.old_sha256):
                os.unlink(name, dir_fd=dir_fd)
                fsync_dir(dir_fd)
            hook(f"deleted:{entry.path}")
            continue
        if _staged_present(dir_fd, entry, verify):
            os.replace(entry.staged, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            fsync_dir(dir_fd)
        hook(f"replaced:{entry.path}")
    _clean_up(tree, state_fd, journal, hook)


def _clean_up(tree: Tree, state_fd: int, journal: Journal, hook: StepHook) -> None:
    """After the commit: best effort, and the journal goes last, only when nothing is left."""
    left = False
    for entry in journal.entries:
        if entry.backup is None:
            continue
        dir_fd = tree.directory(split_path(entry.path)[0])
        try:
            if dir_fd is not None:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(entry.backup, dir_fd=dir_fd)
                fsync_dir(dir_fd)
        except OSError:
            left = True
    try:
        write_receipt(state_fd, journal)
    except (OSError, BundleError):
        pass  # the receipt only short-cuts a replay; without it a retry is a revision conflict
    hook("receipt_written")
    if not left:
        with contextlib.suppress(OSError):
            delete_journal(state_fd)


def _present(dir_fd: int, name: str) -> bool:
    try:
        return stat.S_ISREG(os.lstat(name, dir_fd=dir_fd).st_mode)
    except FileNotFoundError:
        return False


def _exists(dir_fd: int, name: str) -> bool:
    """Whether anything (a file, a folder, a symlink) has the name ``name``."""
    try:
        os.lstat(name, dir_fd=dir_fd)
    except FileNotFoundError:
        return False
    return True


def _holds(dir_fd: int, name: str, sha256: str) -> bool:
    """Whether the regular file ``name`` holds exactly the bytes with this hash."""
    try:
        fd = os.open(name, READ_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        return False
    except OSError as exc:
        if exc.errno == errno.ENAMETOOLONG:
            return False  # a name the file system refuses was never published
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        return sha256_hex(read_all(fd, MAX_STATE_FILE_BYTES)) == sha256
    finally:
        os.close(fd)


def _staged_present(dir_fd: int, entry: Entry, verify: bool) -> bool:
    assert entry.staged is not None  # deletions stage nothing
    try:
        checked = os.lstat(entry.staged, dir_fd=dir_fd)
    except FileNotFoundError:
        return False  # already renamed before the interruption
    if not stat.S_ISREG(checked.st_mode):
        raise rejected("a staged file of an interrupted write is not a regular file")
    if verify:
        fd = os.open(entry.staged, READ_FLAGS, dir_fd=dir_fd)
        try:
            digest = sha256_hex(read_all(fd, MAX_STATE_FILE_BYTES))
        finally:
            os.close(fd)
        if digest != entry.new_sha256:
            raise rejected(f"the staged new version of {entry.path} is damaged")
    return True
