"""What a running call tells the people watching it, besides its result: progress and notices.

The loader and the dispatcher run in a worker thread and know nothing of MCP. They report through
the call's :class:`~bundle_mcp.cancel.CancelToken`, which carries an optional
:class:`CallObserver`; the server's observer turns the reports into ``notifications/progress``
and ``notifications/message`` on the event loop. Without an observer (``bundle-mcp call``, the
validator, tests) every report is a no-op.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from .errors import redact

__all__ = [
    "DEFAULT_LOG_LEVEL",
    "LEVELS",
    "LOGGER_NAME",
    "CallObserver",
    "Notice",
    "level_at_least",
    "notice_text",
]

# RFC 5424 severities as MCP names them, least severe first.
LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
DEFAULT_LOG_LEVEL = "info"  # a 2025 connection that never sent logging/setLevel
LOGGER_NAME = "bundle-mcp"  # the ``logger`` of every notifications/message


def level_at_least(level: str, threshold: str) -> bool:
    """True when ``level`` is ``threshold`` or more severe (both from :data:`LEVELS`)."""
    return LEVELS.index(level) >= LEVELS.index(threshold)


@dataclass(frozen=True, slots=True)
class Notice:
    """One message for the people using the server (the client's log view)."""

    level: str  # one of LEVELS
    message: str  # never an absolute host path: the server prefixes the bundle's URI name
    bundle_path: str | None = None  # the bundle it is about, if any
    # Notices with the same key are the same news: a connection is told once. None: always.
    key: tuple[str, ...] | None = None


class CallObserver(Protocol):
    """Receives a call's reports. Called from the worker thread; must never raise or block."""

    def progress(self, done: int, total: int) -> None:
        """``done`` of ``total`` files handled while loading a bundle."""

    def notice(self, notice: Notice) -> None:
        """Something the people using the server should know about."""


def notice_text(notice: Notice, labels: Mapping[str, str]) -> str:
    """The ``data`` of the notifications/message that tells ``notice``: prefixed with its
    bundle's label (``labels``: bundle path → URI label), never naming a host path."""
    if not notice.bundle_path:
        return redact(notice.message)
    return redact(f"{labels.get(notice.bundle_path, 'bundle')}: {notice.message}")
