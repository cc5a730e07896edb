"""A cold bundle's frontmatter, loaded by a second process while the server starts.

The first call on a bundle with no parse cache waits for every file's frontmatter to be loaded:
the parse policy asks of every file whether it parses. On the generated 10,000-concept bundle
that is about 1.3 s of libyaml and its Python constructor, all under the interpreter lock, so a
thread cannot share it. ``serve`` therefore starts, for each served bundle that has no parse
cache yet, one child process (``python -m bundle_mcp.loader.precheck``) as soon as
``initialize`` is answered: it captures the bundle with the loader's own walk (the same caps,
no symlink followed, nothing outside the root read) and loads the frontmatter of every file
from the last one backwards, while the server imports the SDK and then checks the files from
the first one forwards. They meet in the middle.

What the child sends is keyed by the sha256 of the file's bytes, and a frontmatter is a pure
function of those bytes (:func:`~bundle_mcp.loader.yaml_load.load_frontmatter`), so a result counts
only for the very bytes the server captured: a file changed in between has another key and is
loaded here as usual. The child is a hint, never the truth: if it fails, is slow or sends
something unreadable, the server loads the frontmatter itself, and every answer is the same
(``tests/test_precheck.py`` compares the snapshots both ways).

The child stops when the server has reached the files it is sending (they are then dropped on
arrival: :data:`STOP_AFTER_DROPPED` in a row), when its output pipe closes, or when it is done.
"""

from __future__ import annotations

import hashlib
import logging
import marshal
import os
import struct
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO, Any

from ..cancel import CancelToken
from ..errors import BundleError
from ..storage.handles import pin_root
from .capture import capture
from .frontmatter import FrontmatterError, split_frontmatter

__all__ = ["MIN_FILES", "STOP_AFTER_DROPPED", "Precheck", "Prechecked", "frontmatter_results",
           "holds_files"]

log = logging.getLogger(__name__)

# A bundle smaller than this is loaded faster than a process starts: the child exits at once.
MIN_FILES = 500
# The server reached the files the child is on (each arrival was loaded already): stop it.
STOP_AFTER_DROPPED = 32
_BATCH = 64  # results per frame
_FRAME = struct.Struct("<I")

# One file's frontmatter as the child sends it: the data, or why it does not load.
Result = dict[str, Any] | tuple[str, str, int | None]


def frontmatter_results(
    bundle_path: str, max_files: int, max_bytes: int, min_files: int = MIN_FILES
) -> Iterator[tuple[str, Result]]:
    """The child's work: (sha256, result) for each captured file with a frontmatter block,
    last file first. Files that do not decode or split are left to the server (cheap there)."""
    from .yaml_load import load_frontmatter  # the child's own work: not imported by the server

    fd = pin_root(bundle_path)
    try:
        captured = capture(fd, CancelToken(), max_files=max_files, max_total_bytes=max_bytes)
    finally:
        os.close(fd)
    if len(captured.files) < min_files:
        return
    for f in reversed(captured.files):
        if f.data is None:
            continue
        try:
            split = split_frontmatter(f.data.decode("utf-8"))
        except (UnicodeDecodeError, FrontmatterError):
            continue
        if split.raw is None:
            continue
        result: Result
        try:
            result = load_frontmatter(split.raw, split.raw_line)
        except FrontmatterError as exc:
            result = (exc.code, exc.message, exc.line)
        yield hashlib.sha256(f.data).hexdigest(), result


def _serve_child(argv: list[str]) -> int:
    bundle_path, max_files, max_bytes, min_files = argv[0], *map(int, argv[1:4])
    out = sys.stdout.buffer
    batch: list[tuple[str, Result]] = []
    try:
        for item in frontmatter_results(bundle_path, max_files, max_bytes, min_files):
            batch.append(item)
            if len(batch) == _BATCH:
                _write_frame(out, batch)
                batch = []
        if batch:
            _write_frame(out, batch)
    except BrokenPipeError:
        return 0  # the server stopped listening: it has what it needs
    except BundleError:
        return 0  # a cap or an unlistable root: the server reports it on its own load
    return 0


def _write_frame(out: IO[bytes], batch: list[tuple[str, Result]]) -> None:
    data = marshal.dumps(batch)
    out.write(_FRAME.pack(len(data)) + data)
    out.flush()


@dataclass
class Prechecked:
    """The results the child sent and the server has not used yet (shared by the reader
    thread and the loading threads, under ``lock``)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    results: dict[str, Result] = field(default_factory=dict)
    # Bytes whose frontmatter the server loaded itself: a later arrival for them is dropped.
    loaded_here: set[str] = field(default_factory=set)
    taken: int = 0  # work counters (tests): results used, and arrivals dropped
    dropped: int = 0
    dropped_in_a_row: int = 0

    def take(self, sha256: str) -> Result | None:
        """The child's result for these bytes (once), else None: the caller loads it and the
        child's result, should it come later, is dropped."""
        with self.lock:
            result = self.results.pop(sha256, None)
            if result is None:
                self.loaded_here.add(sha256)
            else:
                self.taken += 1
            return result

    def arrived(self, batch: list[tuple[str, Result]]) -> bool:
        """Keep a frame's results; False once the server has overtaken the child."""
        with self.lock:
            for sha256, result in batch:
                if sha256 in self.loaded_here:
                    self.dropped += 1
                    self.dropped_in_a_row += 1
                else:
                    self.results[sha256] = result
                    self.dropped_in_a_row = 0
            return self.dropped_in_a_row < STOP_AFTER_DROPPED


class Precheck:
    """One child process and the thread that reads its results into :attr:`prechecked`."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self.prechecked = Prechecked()
        self._process = process
        self._thread = threading.Thread(
            target=self._read, name="bundle-mcp-precheck", daemon=True)
        self._thread.start()

    @classmethod
    def start(
        cls, bundle_path: str, max_files: int, max_bytes: int, min_files: int | None = None
    ) -> Precheck | None:
        """The child for ``bundle_path``, or None when it cannot be started (then the server
        simply loads everything itself). A bundle of fewer than ``min_files`` files
        (:data:`MIN_FILES` by default) is left to the server: no child is started for a folder
        that holds fewer files than that (:func:`holds_files`), and a child that captures
        fewer sends nothing."""
        min_files = MIN_FILES if min_files is None else min_files
        if not holds_files(bundle_path, min_files):
            return None
        try:
            process = subprocess.Popen(
                [sys.executable, "-m", __name__, bundle_path,
                 str(max_files), str(max_bytes), str(min_files)],
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                # The child inherits no descriptor but its pipes (the claimed stdio above all).
                close_fds=True,
            )
        except OSError as exc:
            log.debug("no frontmatter precheck for %s: %s", bundle_path, exc)
            return None
        return cls(process)

    def wait(self, timeout: float | None = None) -> bool:
        """Until the child ended and its results are read (tests); True when so."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def stop(self) -> None:
        """End the child now (the server is stopping)."""
        if self._process.poll() is None:
            self._process.kill()

    def _read(self) -> None:
        stream = self._process.stdout
        assert stream is not None
        try:
            while True:
                head = stream.read(_FRAME.size)
                if len(head) < _FRAME.size:
                    break
                (size,) = _FRAME.unpack(head)
                data = stream.read(size)
                if len(data) < size:
                    break
                try:
                    batch = _results(marshal.loads(data))
                except (EOFError, ValueError, TypeError):
                    log.debug("the frontmatter precheck sent an unreadable frame: ignored")
                    break
                if not self.prechecked.arrived(batch):
                    break
        finally:
            stream.close()
            if self._process.poll() is None:
                self._process.kill()
            self._process.wait()


def holds_files(folder: str, count: int) -> bool:
    """Whether ``folder`` holds at least ``count`` regular files, counted below it without
    following a symlink and stopping at ``count``; a folder that cannot be listed counts none.

    Every file the child's capture takes is one of these, so with fewer the child would send
    nothing. Counted here, before any child starts: each child is a Python process that
    imports the loader (a few tenths of a second of CPU), and a server of many small bundles
    (the TypeScript client tests serve 157) started one for each, which kept two cores busy
    for half a minute while the first answers waited."""
    if count <= 0:
        return True
    found = 0
    folders = [folder]
    while folders:
        try:
            with os.scandir(folders.pop()) as entries:
                for entry in entries:
                    if entry.is_dir(follow_symlinks=False):
                        folders.append(entry.path)
                    elif entry.is_file(follow_symlinks=False):
                        found += 1
                        if found >= count:
                            return True
        except OSError:
            continue
    return found >= count


def _results(frame: object) -> list[tuple[str, Result]]:
    """A frame as the child writes it, or ValueError (the server then reads no further)."""
    if not isinstance(frame, list):
        raise ValueError("not a list of results")
    for item in frame:
        if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str)):
            raise ValueError("not a (sha256, result) pair")
        result = item[1]
        if isinstance(result, tuple):
            code, message, line = result
            if not (isinstance(code, str) and isinstance(message, str)
                    and (line is None or isinstance(line, int))):
                raise ValueError("not a frontmatter error")
        elif not isinstance(result, dict):
            raise ValueError("not a frontmatter")
    return frame


if __name__ == "__main__":
    sys.exit(_serve_child(sys.argv[1:]))
