"""Cooperative cancellation: loaders and query loops call ``check()`` as they go."""

from __future__ import annotations

import time

from .errors import cancelled


class CancelToken:
    """Set from another thread (or by a deadline); checked by the worker.

    The worker never returns partial data: a positive check raises ``operation_cancelled``.
    ``check()`` runs inside every query loop, so it is one attribute read (plus a clock read
    when a deadline is set); ``cancel()`` is a single attribute store, atomic under the GIL.
    """

    __slots__ = ("_cancelled", "_deadline")

    def __init__(self, deadline_seconds: float | None = None) -> None:
        self._cancelled = False
        self._deadline = None if deadline_seconds is None else time.monotonic() + deadline_seconds

    def cancel(self) -> None:
        self._cancelled = True

    @property
    def is_cancelled(self) -> bool:
        if self._cancelled:
            return True
        return self._deadline is not None and time.monotonic() >= self._deadline

    def check(self) -> None:
        if self._cancelled or (self._deadline is not None and time.monotonic() >= self._deadline):
            raise cancelled()
