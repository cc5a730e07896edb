"""Cooperative cancellation: loaders and query loops call ``check()`` as they go."""

from __future__ import annotations

import threading
import time

from .errors import cancelled


class CancelToken:
    """Set from another thread (or by a deadline); checked by the worker.

    The worker never returns partial data: a positive check raises ``operation_cancelled``.
    """

    __slots__ = ("_event", "_deadline")

    def __init__(self, deadline_seconds: float | None = None) -> None:
        self._event = threading.Event()
        self._deadline = None if deadline_seconds is None else time.monotonic() + deadline_seconds

    def cancel(self) -> None:
        self._event.set()

    @property
    def is_cancelled(self) -> bool:
        if self._event.is_set():
            return True
        return self._deadline is not None and time.monotonic() >= self._deadline

    def check(self) -> None:
        if self.is_cancelled:
            raise cancelled()

