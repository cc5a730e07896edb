"""Cooperative cancellation: loaders and query loops call ``check()`` as they go.

The token is the one per-call object every stage already receives, so it also carries the call's
optional :class:`~bundle_mcp.observe.CallObserver` (progress and notices for the client).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from .errors import cancelled

if TYPE_CHECKING:
    from .observe import CallObserver, Notice


class CancelToken:
    """Set from another thread (or by a deadline); checked by the worker.

    The worker never returns partial data: a positive check raises ``operation_cancelled``.
    ``check()`` runs inside every query loop, so it is one attribute read (plus a clock read
    when a deadline is set); ``cancel()`` is a single attribute store, atomic under the GIL.
    """

    __slots__ = ("_cancelled", "_deadline", "_observer")

    def __init__(
        self, deadline_seconds: float | None = None, observer: CallObserver | None = None
    ) -> None:
        self._cancelled = False
        self._deadline = None if deadline_seconds is None else time.monotonic() + deadline_seconds
        self._observer = observer

    def cancel(self) -> None:
        self._cancelled = True

    def check(self) -> None:
        if self._cancelled or (self._deadline is not None and time.monotonic() >= self._deadline):
            raise cancelled()

    def progress(self, done: int, total: int) -> None:
        """Tell the observer, if any, that ``done`` of ``total`` items are handled."""
        if self._observer is not None:
            self._observer.progress(done, total)

    def notify(self, notice: Notice) -> None:
        """Hand a notice to the observer, if any (the server log keeps its own record)."""
        if self._observer is not None:
            self._observer.notice(notice)
