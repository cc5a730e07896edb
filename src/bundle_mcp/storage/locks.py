"""The bundle's lock, ``.bundle-mcp/lock``: exclusive for an apply, shared for a reader.

An apply holds the exclusive lock for its whole duration, and recovery holds it while it
finishes or undoes an interrupted apply, so a journal is never rolled back under a live apply's
feet. A reader holds the shared lock while it captures the bundle.
"""

from __future__ import annotations

import fcntl
import os
import stat
import time

from ..cancel import CancelToken
from ..errors import OPERATION_CANCELLED, OPERATION_REJECTED, BundleError, Diagnostic, recovery_step
from .handles import READ_FLAGS
from .refusals import os_failure
from .state_dir import LOCK_FILE, STATE_DIR, open_state_dir

__all__ = ["LOCK_WAIT_SECONDS", "LockRefused", "ReadLock", "WriteLock"]

LOCK_WAIT_SECONDS = 30.0


class LockRefused(BundleError):
    """The exclusive lock's file cannot be opened for writing (``operation_rejected``)."""

    def __init__(self, message: str, diagnostics: tuple[Diagnostic, ...]) -> None:
        super().__init__(OPERATION_REJECTED, message, diagnostics)


class WriteLock:
    """Hold the bundle's exclusive write lock for the duration of a ``with`` block.

    The wait polls so that it can be cancelled and is bounded: a call never hangs behind another
    process. The kernel drops the lock when the holder dies, so a crash never wedges the bundle.
    (A class, not ``@contextmanager``: a generator-based manager re-raises by assigning
    ``__traceback__``, which the frozen :class:`BundleError` refuses.)
    """

    __slots__ = ("_state_fd", "_token", "_fd", "_shared")

    def __init__(
        self, state_fd: int, token: CancelToken | None = None, *, shared: bool = False
    ) -> None:
        self._state_fd = state_fd
        self._token = token
        self._fd = -1
        self._shared = shared

    def __enter__(self) -> None:
        fd = self._open_shared() if self._shared else self._open_exclusive()
        if fd < 0:
            return
        try:
            self._wait(fd)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd

    def _open_shared(self) -> int:
        """The lock file for reading, or -1: readers never create anything in the bundle, and no
        lock file means no writer ever ran."""
        try:
            return os.open(LOCK_FILE, READ_FLAGS, dir_fd=self._state_fd)
        except OSError:
            return -1

    def _open_exclusive(self) -> int:
        try:
            return os.open(
                LOCK_FILE,
                os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
                0o644,
                dir_fd=self._state_fd,
            )
        except OSError as exc:
            refused = os_failure("the bundle's write lock cannot be opened", exc)
            raise LockRefused(refused.message, refused.diagnostics) from None

    def __exit__(self, *_exc: object) -> None:
        if self._fd >= 0:
            os.close(self._fd)  # closing the descriptor releases the flock
        self._fd = -1

    def _wait(self, fd: int) -> None:
        deadline = time.monotonic() + LOCK_WAIT_SECONDS
        pause = 0.002
        while True:
            try:
                mode = fcntl.LOCK_SH if self._shared else fcntl.LOCK_EX
                fcntl.flock(fd, mode | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                pass
            if self._token is not None:
                self._token.check()
            if time.monotonic() >= deadline:
                raise BundleError(
                    OPERATION_CANCELLED,
                    "another write to this bundle is still running",
                    (recovery_step("retry the same call in a moment"),),
                )
            time.sleep(pause)
            pause = min(pause * 2, 0.05)


class ReadLock:
    """A shared lock held while a reader captures the bundle.

    Writers hold the exclusive lock from planning to the last rename, so a capture taken under
    the shared lock never sees half of an apply: an answer never mixes two revisions.
    """

    __slots__ = ("_root_fd", "_token", "_state_fd", "_lock")

    def __init__(self, root_fd: int, token: CancelToken | None = None) -> None:
        self._root_fd = root_fd
        self._token = token
        self._state_fd: int | None = None
        self._lock: WriteLock | None = None

    def __enter__(self) -> None:
        try:
            if not stat.S_ISDIR(os.lstat(STATE_DIR, dir_fd=self._root_fd).st_mode):
                return
        except OSError:
            return
        self._state_fd = open_state_dir(self._root_fd, create=False)
        if self._state_fd is None:
            return
        self._lock = WriteLock(self._state_fd, self._token, shared=True)
        try:
            self._lock.__enter__()
        except BaseException:
            os.close(self._state_fd)
            self._state_fd = None
            raise

    def __exit__(self, *_exc: object) -> None:
        if self._lock is not None:
            self._lock.__exit__()
            self._lock = None
        if self._state_fd is not None:
            os.close(self._state_fd)
            self._state_fd = None
