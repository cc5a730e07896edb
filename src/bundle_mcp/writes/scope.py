"""Whether a write stays inside the calling reader's writable folders: the first check of every
write and of every preview (docs/READERS.md, "Writes under scopes").

A write tool asks before anything else (before the revision is compared, before the bundle is
locked or a file is read), with the paths its request names; a preview asks with the same
paths and with those its plan would change, so that it never promises a write its apply would
refuse. The refusal names the folders the reader may write (its write scope within its read
scope), never a file: whether a named file exists or may be read changes nothing in it.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..errors import ERROR, OPERATION_REJECTED, BundleError, Diagnostic, recovery_step
from ..okf.scopes import Access

__all__ = ["outside", "require_writable", "scope_diagnostic", "scope_refusal", "writable_folders"]

REFUSED = "the write reaches outside the folders this reader may write"


def outside(access: Access, paths: Iterable[str]) -> bool:
    """Whether any of ``paths`` (bundle-relative files) is not writable for ``access``."""
    return any(not access.may_write(path) for path in paths)


def writable_folders(access: Access) -> str:
    """The reader's writable folders, for a message: ``finance/drafts, glossary`` or ``none``."""
    return ", ".join(access.writable_patterns()) or "none"


def scope_refusal(access: Access) -> BundleError:
    """``operation_rejected`` for a write outside the writable folders."""
    return BundleError(
        OPERATION_REJECTED,
        f"{REFUSED}; nothing was changed",
        (recovery_step(f"writable folders: {writable_folders(access)}"),),
    )


def require_writable(access: Access, paths: Iterable[str]) -> None:
    """Raises :func:`scope_refusal` when any of ``paths`` is outside the writable folders."""
    if outside(access, paths):
        raise scope_refusal(access)


def scope_diagnostic(access: Access) -> Diagnostic:
    """The refusal as a preview's ERROR diagnostic (its message says which folders)."""
    return Diagnostic(
        code=OPERATION_REJECTED,
        severity=ERROR,
        message=f"{REFUSED}; writable folders: {writable_folders(access)}",
    )
