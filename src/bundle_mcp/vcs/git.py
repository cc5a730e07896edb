"""Running ``git``: an argument list (never a shell), a timeout, bounded output, and an
environment that no inherited ``GIT_*`` variable can redirect.

Every git call of bundle-mcp goes through :func:`run` (or :func:`stream` for output that is
consumed as it comes, such as ``git archive``). What it guards against:

- A ``GIT_DIR``, ``GIT_WORK_TREE``, ``GIT_INDEX_FILE``... left in the server's environment would
  point git at another repository: every ``GIT_*`` variable is dropped and only ours are set.
- Configuration that runs programs on a read (``core.fsmonitor``, external diff drivers,
  textconv filters, pagers) is switched off per call; transports are limited to file, git,
  http(s) and ssh (``ext::`` runs a command), and git never asks for credentials.
- A value from a caller is never an option: revisions are checked by :func:`revision_problem`
  and paths always follow ``--``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import IO

from ..errors import BundleMcpError

__all__ = [
    "DEFAULT_TIMEOUT",
    "GitFailed",
    "GitMissing",
    "GitResult",
    "git_env",
    "revision_problem",
    "run",
    "stream",
]

DEFAULT_TIMEOUT = 30.0  # seconds for one read-only git command
STDERR_KEPT = 64 * 1024
# Options given before every subcommand: nothing in a repository's or the user's configuration
# may run a program while we only read.
SAFE_CONFIG = (
    "-c", "core.fsmonitor=false",
    "-c", "core.quotepath=off",
    "-c", "core.pager=cat",
    "-c", "color.ui=never",
    "-c", "protocol.ext.allow=never",
    "-c", "diff.external=",
    "-c", "core.hooksPath=/dev/null",
)
ALLOWED_PROTOCOLS = "file:git:http:https:ssh"

# What a caller may give as a revision: a name, a hash, and the ancestry suffixes (~ ^ @{n}).
# Never a leading '-' (an option), never '..' (a range) or ':' (a path in a tree).
_REVISION = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_./~^@{}+-]{0,255}")


class GitMissing(BundleMcpError):
    """The ``git`` command is not installed (or not on PATH)."""


class GitFailed(BundleMcpError):
    """git exited non-zero, timed out, or wrote more than it may."""

    def __init__(self, message: str, stderr: str = "") -> None:
        super().__init__(message)
        self.stderr = stderr


@dataclass(frozen=True, slots=True)
class GitResult:
    stdout: bytes
    stderr: str
    returncode: int
    overflow: bool  # stdout was longer than max_output: cut there, the process killed


def revision_problem(value: str) -> str | None:
    """Why ``value`` cannot be a revision we hand to git, or ``None``."""
    if not _REVISION.fullmatch(value):
        return ("a revision is a branch, tag or commit name, optionally with ~N, ^N or @{N}: "
                "letters, digits and _ . / ~ ^ @ { } + -, not starting with '-' or '.'")
    if ".." in value or value.endswith((".", "/")) or "//" in value or "@{-" in value:
        return "a revision names one commit: no '..' ranges, no '@{-N}'"
    return None


def git_env() -> dict[str, str]:
    """The environment for git: the server's, less every ``GIT_*`` variable, plus ours."""
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("GIT_")}
    env.update({
        "GIT_TERMINAL_PROMPT": "0",  # never ask for a password on a terminal
        "GIT_ASKPASS": "/bin/false" if os.path.exists("/bin/false") else "false",
        "SSH_ASKPASS": "/bin/false" if os.path.exists("/bin/false") else "false",
        "GIT_OPTIONAL_LOCKS": "0",  # a read never takes the index lock or rewrites the index
        "GIT_ALLOW_PROTOCOL": ALLOWED_PROTOCOLS,
        "LC_ALL": "C",
    })
    return env


def _git() -> str:
    found = shutil.which("git")
    if found is None:
        raise GitMissing("the git command is not installed")
    return found


def _drain(pipe: IO[bytes], keep: int, into: list[bytes], over: list[bool]) -> None:
    """Read ``pipe`` to the end, keeping at most ``keep`` bytes (the rest is counted as over)."""
    kept = 0
    while True:
        chunk = pipe.read(65536)
        if not chunk:
            return
        if kept < keep:
            into.append(chunk[: keep - kept])
        if kept + len(chunk) > keep:
            over.append(True)
        kept += len(chunk)


@dataclass(frozen=True, slots=True)
class _Running:
    """One git process as :func:`run` and :func:`stream` start it: its stderr drained (and kept
    up to :data:`STDERR_KEPT`) by a thread, and a timer that kills it after ``timeout``."""

    process: subprocess.Popen[bytes]
    err: list[bytes]
    err_thread: threading.Thread
    killed: threading.Event
    timer: threading.Timer

    @classmethod
    def start(cls, args: Sequence[str], cwd: str | None, timeout: float) -> _Running:
        process = subprocess.Popen(  # noqa: S603 (an argument list, never a shell)
            [_git(), *SAFE_CONFIG, *args],
            cwd=cwd,
            env=git_env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        err: list[bytes] = []
        err_thread = threading.Thread(target=_drain, args=(process.stderr, STDERR_KEPT, err, []),
                                      daemon=True)
        err_thread.start()
        killed = threading.Event()

        def kill() -> None:
            killed.set()
            process.kill()

        timer = threading.Timer(timeout, kill)
        timer.daemon = True
        timer.start()
        return cls(process, err, err_thread, killed, timer)

    def stderr(self, args: Sequence[str], timeout: float) -> str:
        """What git wrote to stderr, once it has ended.

        Raises:
            GitFailed: the timer killed it.
        """
        stderr = b"".join(self.err).decode("utf-8", "replace").strip()
        if self.killed.is_set():
            raise GitFailed(f"git {args[0]} took longer than {timeout:g} s", stderr)
        return stderr


def run(
    args: Sequence[str],
    *,
    cwd: str | None,
    timeout: float = DEFAULT_TIMEOUT,
    max_output: int = 16 * 1024 * 1024,
) -> GitResult:
    """``git <SAFE_CONFIG> args...`` in ``cwd``; stdout kept up to ``max_output`` bytes.

    Past ``max_output`` the process is killed and ``overflow`` set (the caller decides whether
    that is a refusal). A non-zero exit is returned, not raised: some commands answer with it.

    Raises:
        GitMissing: no git on PATH.
        GitFailed: the command ran longer than ``timeout`` seconds.
    """
    running = _Running.start(args, cwd, timeout)
    process = running.process
    assert process.stdout is not None and process.stderr is not None
    out: list[bytes] = []
    over: list[bool] = []
    try:
        kept = 0
        while True:
            chunk = process.stdout.read(65536)
            if not chunk:
                break
            if kept + len(chunk) > max_output:
                out.append(chunk[: max_output - kept])
                over.append(True)
                process.kill()
                break
            out.append(chunk)
            kept += len(chunk)
        returncode = process.wait()
        running.err_thread.join()
    finally:
        running.timer.cancel()
        process.stdout.close()
        process.stderr.close()
    stderr = running.stderr(args, timeout)
    return GitResult(b"".join(out), stderr, returncode, bool(over))


@contextmanager
def stream(
    args: Sequence[str], *, cwd: str | None, timeout: float
) -> Iterator[IO[bytes]]:
    """``git args...`` with its stdout to read as it comes (``git archive`` into the unpacker).

    The process is killed after ``timeout`` seconds, or when the reader stops early; leaving
    the block checks the exit status.

    Raises:
        GitMissing: no git on PATH.
        GitFailed: git exited non-zero or timed out (after the block, unless it raised).
    """
    running = _Running.start(args, cwd, timeout)
    process = running.process
    assert process.stdout is not None and process.stderr is not None
    try:
        yield process.stdout
    except BaseException:
        process.kill()
        raise
    finally:
        running.timer.cancel()
        process.stdout.close()
        returncode = process.wait()
        running.err_thread.join()
        process.stderr.close()
    stderr = running.stderr(args, timeout)
    if returncode != 0:
        raise GitFailed(f"git {args[0]} failed: {_first_line(stderr)}", stderr)


def _first_line(text: str) -> str:
    return text.splitlines()[0] if text else "no message"
