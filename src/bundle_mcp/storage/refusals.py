"""How a refused file-system step is reported: ``operation_rejected``, naming no host path.

A write that the bundle's state, its folder or the disk refuses is never a crash: it becomes a
:class:`~bundle_mcp.errors.BundleError` whose message says what was refused and why (the errno's
name and text, never the exception's own text, which may carry a host path).
"""

from __future__ import annotations

import errno
import os

from ..errors import OPERATION_REJECTED, BundleError, recovery_step

__all__ = ["os_failure", "read_only_rejection", "reason", "rejected"]

_READ_ONLY_MESSAGE = (
    "the bundle is on a read-only file system: this server cannot write to it; nothing was "
    "changed"
)
_READ_ONLY_STEP = (
    "reads work as usual; to write, mount the bundle read-write, or edit the bundle's source "
    "(a git repository, a volume) instead; an operator can serve it with --read-only to leave "
    "the write tools out"
)


def rejected(message: str, step: str | None = None) -> BundleError:
    """``operation_rejected`` with ``message`` and, when given, one recovery step."""
    steps = (recovery_step(step),) if step else ()
    return BundleError(OPERATION_REJECTED, message, steps)


def read_only_rejection() -> BundleError:
    """``operation_rejected`` for a write to a bundle on a read-only file system."""
    return rejected(_READ_ONLY_MESSAGE, _READ_ONLY_STEP)


def os_failure(what: str, exc: OSError) -> BundleError:
    """A refused filesystem call as ``operation_rejected``; the message names no host path."""
    if exc.errno == errno.EROFS:  # mounted read-only after the up-front check, or not telling
        return read_only_rejection()
    name = errno.errorcode.get(exc.errno or 0, "error")
    return rejected(
        f"{what}: the filesystem refused it ({name}: {os.strerror(exc.errno or 0)})",
        "free disk space or fix the bundle folder's permissions, then retry the same call",
    )


def reason(exc: OSError | BundleError) -> str:
    """Why a step failed, for a message: the error's own message, or the errno's name and text."""
    if isinstance(exc, BundleError):
        return exc.message
    name = errno.errorcode.get(exc.errno or 0, "error")
    return f"{name}: {os.strerror(exc.errno or 0)}"
