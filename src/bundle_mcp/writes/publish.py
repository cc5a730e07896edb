"""Publish whole-file writes to a bundle: compare-and-swap, all or nothing, replayable.

``apply_writes`` is the one way any write tool changes a bundle (docs/DESIGN.md §5). Under the
bundle's exclusive lock it finishes any interrupted apply, replays a durable receipt for an
identical request, checks the base revision and every target's current hash, then

    journal (staging) → stage each file beside its target, and link its old version
    → journal (publishing) → rename each stage over its target, or unlink a deleted target
    (sorted by path, root index.md last) → delete the old versions → receipt → no journal

with an fsync at every step, so a crash anywhere leaves a journal from which the next look at the
bundle rolls back (still staging) or forward (publishing): the bundle's revision is always the
base or the result, never a third. A publication that fails in this process (a rename refused
by the file system) is undone at once from the old versions, so a failed call leaves the bundle
at its base. Every name is checked against the file system's limits before anything is staged.

The lock, the journal's format, receipts and recovery are :mod:`bundle_mcp.storage`'s, shared
with every reader; what is here is the apply itself: the checks, the staging and the sequence.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass, replace

from ..cancel import CancelToken
from ..errors import REVISION_CONFLICT, BundleError, recovery_step, resource_limit
from ..limits import DEFAULT_CAPS, MAX_PATH_BYTES, NAME_MAX_BYTES, Caps
from ..loader.capture import (
    MAX_DEPTH,
    MAX_FILE_BYTES,
    Capture,
    capture,
    read_ignore_rules,
)
from ..loader.current import changed_view, current_view
from ..loader.ignore import IgnoreRules
from ..model import FileRecord, Snapshot
from ..okf.scopes import FULL_ACCESS, Access, FolderScope
from ..storage import handles  # on_read_only_fs looked up per call: tests stand in for a mount
from ..storage.handles import (
    NEW_FILE_FLAGS,
    READ_FLAGS,
    Tree,
    fsync_dir,
    parent_dirs,
    pin_root,
    read_all,
    sha256_hex,
    split_path,
    write_all,
)
from ..storage.journal import (
    DIGEST,
    HEX64,
    STAGING,
    Entry,
    Journal,
    backup_name,
    staged_name,
    write_journal,
)
from ..storage.locks import WriteLock
from ..storage.receipts import Receipt, read_receipt
from ..storage.recovery import (
    RecoveryFailed,
    StepHook,
    finish,
    no_step,
    recover_locked,
    roll_back,
)
from ..storage.refusals import os_failure, read_only_rejection, reason, rejected
from ..storage.state_dir import MAX_STATE_FILE_BYTES, open_state_dir
from .scope import require_writable

__all__ = ["PlannedWrite", "Receipt", "apply_writes"]

ROOT_INDEX = "index.md"
_JOURNAL_REFUSED = "the write journal cannot be saved; nothing was changed"


@dataclass(frozen=True, slots=True)
class PlannedWrite:
    path: str  # bundle-relative '/'-separated path of a .md file
    old_sha256: str | None  # hex sha256 the file must have now; None = the file must not exist yet
    new_bytes: bytes | None  # None: delete the file (it must exist, with old_sha256)

    def __post_init__(self) -> None:
        if self.new_bytes is None and self.old_sha256 is None:
            raise ValueError("a deletion names the hash of the file it deletes")


@dataclass(frozen=True, slots=True)
class _Plan:
    """A checked write: where it goes and what the target holds now."""

    write: PlannedWrite
    new_sha256: str | None  # None: a deletion
    mode: int | None  # the current file's permission bits, kept on the new version
    missing_dirs: tuple[str, ...]
    changes: bool


def apply_writes(
    bundle_path: str,
    base_revision: str,
    writes: tuple[PlannedWrite, ...],
    request_digest: str,
    token: CancelToken | None,
    *,
    step_hook: StepHook | None = None,
    like: Snapshot | None = None,
    access: Access = FULL_ACCESS,
    caps: Caps = DEFAULT_CAPS,
) -> Receipt:
    """Publish ``writes`` atomically if the bundle is still at ``base_revision``.

    Revisions are the caller's: the revision of ``access.read``'s view of the bundle, computed
    as the loader computes it (attachments included; ``like``, the snapshot the caller read,
    spares parsing the files that did not change since). A write outside ``access``'s writable
    folders is refused before anything is locked or staged.

    An identical request (same ``request_digest``) whose result is still the bundle's revision
    replays its receipt and writes nothing. Writes whose bytes equal the current file are no-ops;
    when nothing changes the receipt has ``result_revision == base_revision`` and no paths.
    Cancellation is honoured until publishing starts; after that the apply always finishes.

    Raises:
        BundleError: ``revision_conflict`` (base or a file's hash moved on), ``operation_rejected``
            (unsafe or invalid target, a bundle on a read-only file system, a refused disk
            write; the bundle is left unchanged),
            ``resource_limit`` (the bundle, now or after the writes, breaks ``caps``: the
            loader's caps the server was given), ``operation_cancelled``.
        ValueError: a malformed ``request_digest`` or ``old_sha256`` (a caller bug).
    """
    token = token if token is not None else CancelToken()
    hook = step_hook if step_hook is not None else no_step
    ordered = _ordered(writes, request_digest)
    # The tools ask first, with the paths their request names (writes/scope.py); this holds
    # the rule for what is actually published, whoever calls.
    require_writable(access, (w.path for w in ordered))
    root_fd = pin_root(bundle_path)
    try:
        # Before the state folder is created: on a read-only mount nothing is attempted at all.
        if handles.on_read_only_fs(root_fd):
            raise read_only_rejection()
        state_fd = open_state_dir(root_fd, create=True)
        assert state_fd is not None
        try:
            with WriteLock(state_fd, token):
                hook("locked")
                recover_locked(root_fd, state_fd)
                return _apply_locked(
                    root_fd, state_fd, base_revision, ordered, request_digest, token, hook,
                    like, access.read, caps,
                )
        finally:
            os.close(state_fd)
    finally:
        os.close(root_fd)


# ---------------------------------------------------------------------------- the protocol


def _apply_locked(
    root_fd: int,
    state_fd: int,
    base_revision: str,
    ordered: tuple[PlannedWrite, ...],
    request_digest: str,
    token: CancelToken,
    hook: StepHook,
    like: Snapshot | None,
    scope: FolderScope,
    caps: Caps,
) -> Receipt:
    captured = capture(root_fd, token, max_files=caps.max_files, max_total_bytes=caps.max_bytes)
    records = _records(captured)
    seen = current_view(root_fd, captured, like, scope, token, max_bytes=caps.max_bytes)
    current = "sha256:" + seen.revision
    prior = read_receipt(state_fd, request_digest)
    if prior is not None and prior.result_revision == current:
        return replace(prior, replayed=True)
    if current != base_revision:
        raise _conflict("the bundle changed since the base revision was read")
    rules = read_ignore_rules(root_fd)
    with Tree(root_fd) as tree:
        try:
            plans = tuple(_plan(tree, rules, w) for w in ordered)
        except OSError as exc:
            raise os_failure("a write target cannot be read", exc) from None
        changing = tuple(p for p in plans if p.changes)
        if not changing:
            return Receipt(request_digest, current, current, (), False)
        _check_caps(records, changing, caps)
        result = "sha256:" + changed_view(
            seen, {p.write.path: p.write.new_bytes for p in changing},
            max_bytes=caps.max_bytes).revision
        token.check()
        entries = tuple(
            Entry(
                p.write.path,
                p.write.old_sha256,
                p.new_sha256,
                None if p.new_sha256 is None else staged_name(p.write.path, request_digest),
                None
                if p.write.old_sha256 is None
                else backup_name(p.write.path, request_digest),
            )
            for p in changing
        )
        created = tuple(
            sorted({d for p in changing for d in p.missing_dirs}, key=lambda d: (d.count("/"), d))
        )
        staged = Journal(STAGING, request_digest, current, result, entries, created)
        _publish(tree, state_fd, staged, changing, token, hook)
    return Receipt(request_digest, current, result, tuple(sorted(e.path for e in entries)), False)


def _publish(
    tree: Tree,
    state_fd: int,
    staged: Journal,
    changing: tuple[_Plan, ...],
    token: CancelToken,
    hook: StepHook,
) -> None:
    """Journal, stage, mark publishing, rename, clean up: the steps the step hook names."""
    try:
        write_journal(state_fd, staged)
    except OSError as exc:
        raise os_failure(_JOURNAL_REFUSED, exc) from None
    hook("journal_written")
    try:
        _stage_all(tree, changing, staged.entries, token, hook)
    except OSError as exc:
        _abandon(tree, state_fd, staged)
        raise os_failure(
            f"staging the new version of the bundle failed; nothing was changed "
            f"({len(changing)} file(s) planned)",
            exc,
        ) from None
    except BundleError:
        _abandon(tree, state_fd, staged)
        raise
    publishing = staged.publishing()
    try:
        write_journal(state_fd, publishing)
    except OSError as exc:
        _abandon(tree, state_fd, staged)
        raise os_failure(_JOURNAL_REFUSED, exc) from None
    hook("publishing")
    # From here no cancellation: the apply is completed, or (a rename refused) undone at once.
    try:
        published = finish(tree, state_fd, publishing, hook, verify=False)
    except (OSError, BundleError) as exc:
        raise RecoveryFailed(
            "publishing the write failed and it could not be undone "
            f"({reason(exc)}); each file is wholly old or wholly new, reads go on, "
            "validate_bundle reports the pending write and writes are refused until it is "
            "resolved",
            "make the bundle folder writable again; the next call finishes or undoes the write",
        ) from None
    if not published:
        raise rejected(
            "publishing the write failed (the file system refused a rename); it was undone "
            "and nothing was changed",
            "check the bundle folder's permissions and free space, then retry the same call",
        )
    hook("done")


def _stage_all(
    tree: Tree,
    changing: tuple[_Plan, ...],
    entries: tuple[Entry, ...],
    token: CancelToken,
    hook: StepHook,
) -> None:
    """Write every new version beside its target (``_publish`` undoes the staging on failure)."""
    for plan, entry in zip(changing, entries, strict=True):
        token.check()
        _stage(tree, plan, entry)
        hook(f"staged:{entry.path}")
    token.check()


def _stage(tree: Tree, plan: _Plan, entry: Entry) -> None:
    parent, name = split_path(entry.path)
    dir_fd = tree.directory(parent, create=True)
    assert dir_fd is not None
    if entry.staged is None or plan.write.new_bytes is None:
        # a deletion stages nothing: its old version is kept, and publishing unlinks the target
        assert entry.backup is not None
        _keep_old_version(dir_fd, name, entry.backup)
        return
    try:
        fd = os.open(entry.staged, NEW_FILE_FLAGS, 0o666, dir_fd=dir_fd)
    except FileExistsError:
        # a leftover of our own naming scheme (recovery already ran under this lock): replace it
        os.unlink(entry.staged, dir_fd=dir_fd)
        fd = os.open(entry.staged, NEW_FILE_FLAGS, 0o666, dir_fd=dir_fd)
    try:
        if plan.mode is not None:
            os.fchmod(fd, plan.mode)
        write_all(fd, plan.write.new_bytes)
        os.fsync(fd)
    finally:
        os.close(fd)
    if entry.backup is not None:
        _keep_old_version(dir_fd, name, entry.backup)
    fsync_dir(dir_fd)


def _abandon(tree: Tree, state_fd: int, staged: Journal) -> None:
    """Roll back in-process. If even that fails, the journal stays in "staging" and the next
    access rolls back: either way every file keeps its old version."""
    with contextlib.suppress(OSError, BundleError):
        roll_back(tree, state_fd, staged)


def _keep_old_version(dir_fd: int, name: str, backup: str) -> None:
    """Make ``backup`` a second name of the current ``name`` (a copy without hard links).

    Raises:
        OSError: the file system refused; the caller abandons the apply before publishing.
    """
    with contextlib.suppress(FileNotFoundError):
        os.unlink(backup, dir_fd=dir_fd)  # a leftover of this apply's own naming scheme
    try:
        os.link(name, backup, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.EXDEV, errno.EMLINK, errno.ENOTSUP, errno.ENOSYS):
            raise
        _copy_file(dir_fd, name, backup)
    fsync_dir(dir_fd)


def _copy_file(dir_fd: int, name: str, copy: str) -> None:
    src = os.open(name, READ_FLAGS, dir_fd=dir_fd)
    try:
        if not stat.S_ISREG(os.fstat(src).st_mode):
            raise rejected("the write target is not a regular file")
        data = read_all(src, MAX_STATE_FILE_BYTES)
        mode = stat.S_IMODE(os.fstat(src).st_mode)
    finally:
        os.close(src)
    fd = os.open(copy, NEW_FILE_FLAGS, 0o600, dir_fd=dir_fd)
    try:
        os.fchmod(fd, mode)
        write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


# ---------------------------------------------------------------------------- checks


def _ordered(writes: Iterable[PlannedWrite], request_digest: str) -> tuple[PlannedWrite, ...]:
    """The writes in publish order (sorted by path, the root index.md last), each checked."""
    if not DIGEST.fullmatch(request_digest):
        raise ValueError("request_digest must be sha256:<64 lowercase hex>")
    seen: set[str] = set()
    for write in writes:
        if write.old_sha256 is not None and not HEX64.fullmatch(write.old_sha256):
            raise ValueError("old_sha256 must be 64 lowercase hex digits or None")
        problem = _path_problem(write.path)
        if problem is not None:
            raise rejected(f"refusing to write {write.path!r}: {problem}")
        if write.path in seen:
            raise rejected(f"refusing to write {write.path!r} twice in one apply")
        seen.add(write.path)
        if write.new_bytes is not None and len(write.new_bytes) > MAX_FILE_BYTES:
            raise resource_limit(
                f"the new version of {write.path} is larger than {MAX_FILE_BYTES} bytes",
                "split the content over several concepts",
            )
    return tuple(sorted(writes, key=lambda w: (w.path == ROOT_INDEX, w.path)))


def _path_problem(path: str) -> str | None:
    """Why ``path`` cannot be written, or ``None``. Keeps every write inside the visible bundle."""
    if not isinstance(path, str) or not path:
        return "the path is empty"
    try:
        size = len(path.encode("utf-8"))
    except UnicodeEncodeError:
        return "the path is not valid Unicode"
    if size > MAX_PATH_BYTES:
        return f"the path is longer than {MAX_PATH_BYTES} bytes"
    if "\x00" in path or "\\" in path:
        return "the path contains NUL or '\\'"
    segments = path.split("/")
    if any(not s or s in (".", "..") for s in segments):
        return "the path must be relative, without empty, '.' or '..' segments"
    if any(len(s.encode("utf-8")) > NAME_MAX_BYTES for s in segments):
        return f"a file or folder name is longer than {NAME_MAX_BYTES} bytes"
    if any(s.startswith(".") for s in segments):
        return "dot-files and dot-folders are not part of the bundle"
    if not path.endswith(".md"):
        return "only Markdown (.md) documents are written"
    if len(segments) > MAX_DEPTH:
        return f"the path is nested deeper than {MAX_DEPTH} levels"
    return None


def _plan(tree: Tree, rules: IgnoreRules, write: PlannedWrite) -> _Plan:
    """Check one write against the disk: a safe target, and the hash the caller expects."""
    parent, name = split_path(write.path)
    if rules.ignored(write.path, is_dir=False) or any(
        rules.ignored(d, is_dir=True) for d in parent_dirs(parent)
    ):
        raise rejected(f"{write.path} is excluded by .okfignore; the bundle would not see it")
    missing = tree.missing_dirs(parent)
    dir_fd = None if missing else tree.directory(parent)
    existing = None if dir_fd is None else _inspect_target(dir_fd, name)
    if write.old_sha256 is None and existing is not None:
        raise _conflict(f"{write.path} was created since the base revision was read")
    if write.old_sha256 is not None and (existing is None or existing.sha256 != write.old_sha256):
        raise _conflict(f"{write.path} changed since the base revision was read")
    if write.new_bytes is None:  # a deletion of the file checked just above
        return _Plan(write=write, new_sha256=None, mode=None, missing_dirs=(), changes=True)
    new_sha = hashlib.sha256(write.new_bytes).hexdigest()
    return _Plan(
        write=write,
        new_sha256=new_sha,
        mode=None if existing is None else existing.mode,
        missing_dirs=missing,
        changes=existing is None or existing.sha256 != new_sha,
    )


@dataclass(frozen=True, slots=True)
class _Existing:
    """A regular file found at a write target."""

    sha256: str
    mode: int


def _inspect_target(dir_fd: int, name: str) -> _Existing | None:
    """The regular file ``name`` in ``dir_fd``, or ``None`` when nothing is there.

    Raises:
        BundleError: ``operation_rejected`` for a symlink or anything but a regular file.
    """
    try:
        checked = os.lstat(name, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(checked.st_mode):
        raise rejected("the write target is a symlink; symlinks are never followed or replaced")
    if not stat.S_ISREG(checked.st_mode):
        raise rejected("the write target exists and is not a regular file")
    fd = os.open(name, READ_FLAGS, dir_fd=dir_fd)
    try:
        opened = os.fstat(fd)
        if (opened.st_dev, opened.st_ino) != (checked.st_dev, checked.st_ino):
            raise rejected("the write target changed while it was read", "retry the call")
        digest = sha256_hex(read_all(fd, MAX_STATE_FILE_BYTES))
        return _Existing(digest, stat.S_IMODE(opened.st_mode))
    finally:
        os.close(fd)


def _check_caps(
    records: dict[str, FileRecord], changing: tuple[_Plan, ...], caps: Caps
) -> None:
    """The loader's caps, over the whole bundle (whoever writes), must hold after the writes."""
    after = dict(records)
    for plan in changing:
        if plan.write.new_bytes is None or plan.new_sha256 is None:
            after.pop(plan.write.path, None)
            continue
        after[plan.write.path] = FileRecord(
            plan.write.path, len(plan.write.new_bytes), plan.new_sha256
        )
    if len(after) > caps.max_files:
        raise resource_limit(
            f"the bundle would have more than {caps.max_files} Markdown files",
            "split the bundle before adding concepts",
        )
    if sum(r.size for r in after.values()) > caps.max_bytes:
        raise resource_limit(
            f"the bundle's Markdown files would exceed {caps.max_bytes} bytes in total",
            "shorten the content or split the bundle",
        )


def _records(captured: Capture) -> dict[str, FileRecord]:
    return {
        f.path: FileRecord(f.path, len(f.data or b""), hashlib.sha256(f.data or b"").hexdigest())
        for f in captured.files
    }


def _conflict(message: str) -> BundleError:
    return BundleError(
        REVISION_CONFLICT,
        message,
        (
            recovery_step(
                "preview again (or read the concept again) and retry against the new revision"
            ),
        ),
    )
