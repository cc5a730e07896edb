"""``serve --http ... --workers N``: N server processes behind one address.

One process serves stateless HTTP on one core at most (the interpreter lock), so several
processes share the port. That is safe because every HTTP request stands alone (no session);
each worker loads the bundles itself, and they share the on-disk parse cache, whose packs are
written atomically.

The sockets are bound in the parent before any fork, so a taken port is reported once, on one
line. On Linux every worker gets its own listening socket on the same port (``SO_REUSEPORT``):
the kernel spreads the connections over them. One socket shared by all would not: a worker
that wakes first accepts a whole burst of connections, and keep-alive clients then stay on it.
Elsewhere the workers share one socket.

The parent only supervises. SIGTERM or SIGINT is passed on to every worker, which finishes
its requests and exits; a worker that dies on its own ends the server (the others are stopped,
exit status 1), so the supervisor of the whole process (Kubernetes, systemd) restarts it
instead of a half-sized server running on unnoticed. A worker also exits when the parent is
killed outright (Linux's parent-death signal), so no worker is left behind.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import signal
import socket
import sys
import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from types import FrameType

__all__ = ["EXIT_WORKER_DIED", "bind_workers", "supervise"]

log = logging.getLogger(__name__)

EXIT_WORKER_DIED = 1
STOP_SECONDS = 30.0  # a worker still running this long after SIGTERM is killed
_POLL_SECONDS = 0.1
_PR_SET_PDEATHSIG = 1
_SHARE_PORT = sys.platform.startswith("linux") and hasattr(socket, "SO_REUSEPORT")
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def bind_workers(host: str, port: int, workers: int) -> list[socket.socket]:
    """The listening sockets of ``workers`` processes (one per worker where the kernel
    balances them, else one shared), all on one port (port 0: the kernel picks it).

    Raises:
        OSError: the address is taken or cannot be bound.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    if not _SHARE_PORT:
        return [socket.create_server((host, port), family=family, backlog=2048)]
    if port != 0:
        # SO_REUSEPORT lets anyone of this user bind the port too: check that no one (another
        # --workers server, say) holds it, so that two servers never share one address.
        socket.create_server((host, port), family=family).close()
    sockets: list[socket.socket] = []
    try:
        for _ in range(workers):
            sockets.append(
                socket.create_server(
                    (host, port), family=family, backlog=2048, reuse_port=True
                )
            )
            port = sockets[0].getsockname()[1]
    except OSError:
        for sock in sockets:
            sock.close()
        raise
    return sockets


def supervise(
    sockets: Sequence[socket.socket],
    workers: int,
    serve: Callable[[socket.socket], int],
    on_started: Callable[[list[int]], None] | None = None,
) -> int:
    """Fork ``workers`` processes that each run ``serve(socket)``; wait for all of them.

    The sockets pass to the workers: the parent closes its own copies once they are forked.

    Returns 0 once every worker has stopped after SIGTERM/SIGINT, or
    :data:`EXIT_WORKER_DIED` when a worker exited on its own (the others are then stopped).
    ``on_started(pids)`` runs in the parent once every worker is forked.
    """
    pids: list[int] = []
    stop: list[int] = []  # the signal that asked us to stop, once one did

    def forward(signum: int, frame: FrameType | None) -> None:
        if not stop:
            stop.append(signum)
            _signal_all(pids, signal.SIGTERM)

    def reload(signum: int, frame: FrameType | None) -> None:
        _signal_all(pids, signal.SIGHUP)  # each worker reloads its own readers file

    previous = {sig: signal.signal(sig, forward) for sig in _STOP_SIGNALS}
    previous_reload = signal.signal(signal.SIGHUP, reload)
    try:
        for number in range(workers):
            if stop:
                break
            pid = os.fork()
            if pid == 0:  # the worker: never returns into the parent's code
                own = sockets[number % len(sockets)]
                _close_all(sock for sock in sockets if sock is not own)
                _run_worker(serve, own, previous)
            pids.append(pid)
        # A listening socket left open in a process that never accepts on it would still get
        # its share of the connections, which would then wait forever: only workers keep them.
        _close_all(sockets)
        if on_started is not None and not stop:
            on_started(list(pids))
        return _wait(pids, stop)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        signal.signal(signal.SIGHUP, previous_reload)


def _run_worker(
    serve: Callable[[socket.socket], int],
    sock: socket.socket,
    handlers: dict[signal.Signals, Callable[[int, FrameType | None], object] | int | None],
) -> None:
    code = 1
    try:
        for sig, handler in handlers.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
        # Not the parent's forwarder (it would signal the siblings) and not the default (which
        # ends the process): ignored until the server installs its reload.
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        _die_with_parent()
        code = serve(sock)
    except KeyboardInterrupt:
        code = 0
    finally:
        if sys.exc_info()[0] is not None:  # os._exit below would swallow the traceback
            traceback.print_exc()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)  # never run the parent's cleanup (atexit, finally blocks) a second time


def _die_with_parent() -> None:
    """Ask Linux to send SIGTERM when the parent dies (a supervisor killed with SIGKILL)."""
    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() == 1:  # the parent died before the call: nobody would send it
        os.kill(os.getpid(), signal.SIGTERM)


def _wait(pids: list[int], stop: list[int]) -> int:
    running = set(pids)
    died = False
    deadline: float | None = None
    while running:
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            if stop and deadline is None:
                deadline = time.monotonic() + STOP_SECONDS
            if deadline is not None and time.monotonic() > deadline:
                log.error("workers %s did not stop in %g s: killed", sorted(running), STOP_SECONDS)
                _signal_all(sorted(running), signal.SIGKILL)
                deadline = float("inf")
            time.sleep(_POLL_SECONDS)
            continue
        running.discard(pid)
        if not stop:
            died = True
            log.error(
                "worker %d exited (%s): stopping the other workers", pid, _describe(status)
            )
            stop.append(0)
            _signal_all(sorted(running), signal.SIGTERM)
    return EXIT_WORKER_DIED if died else 0


def _close_all(sockets: Iterable[socket.socket]) -> None:
    for sock in sockets:
        sock.close()


def _signal_all(pids: Sequence[int], sig: signal.Signals) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass  # already gone; waitpid collects it


def _describe(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"signal {signal.Signals(os.WTERMSIG(status)).name}"
    return f"status {os.waitstatus_to_exitcode(status)}"
