"""Which files of a bundle a reader may see (or write): folder scopes.

A scope is a set of folder patterns, the same folder notion as a search's ``project``: a pattern
names folders, and a named folder is in scope with everything below it.

- ``finance`` names the folder ``finance`` (so ``finance/q3/plan.md`` is in scope).
- A pattern may use globs segment by segment: ``*`` and ``?`` and ``[…]`` within one segment,
  ``**`` for any number of segments (``teams/*/public``, ``**/shared``).
- ``/`` names the root folder's own files (the root ``index.md`` and ``log.md``, concepts at the
  root) and nothing below it; ``**`` (or ``.``) names every folder, the root included.

A file is in scope when the folder that holds it is. (A reader's view also keeps, as bare
paths, the folders that lead to one in scope: ``teams`` for ``teams/*/public``; see
:mod:`bundle_mcp.loader.views`.)
"""

from __future__ import annotations

import fnmatch
import posixpath
from dataclasses import dataclass

__all__ = ["EVERYTHING", "FULL_ACCESS", "NOTHING", "Access", "FolderScope", "pattern_problem"]

_ROOT = "/"
_ALL = "**"
_GLOB_CHARS = frozenset("*?[")


def pattern_problem(pattern: str) -> str | None:
    """Why ``pattern`` is not a folder pattern, or ``None`` when it is one."""
    if pattern in (_ROOT, _ALL, "."):
        return None
    if not pattern or pattern != pattern.strip():
        return "a folder pattern is a non-empty bundle-relative path without surrounding spaces"
    if pattern.startswith("/") or pattern.endswith("/") or "\\" in pattern:
        return ("a folder pattern is relative to the bundle root, with '/' between folders "
                "(use '/' alone for the root's own files)")
    for segment in pattern.split("/"):
        if segment in ("", ".", ".."):
            return "a folder pattern has no empty, '.' or '..' segments"
        if "**" in segment and segment != "**":
            return "'**' stands alone as a whole segment"
        if segment.startswith("."):
            return "hidden folders are never part of a bundle"
    return None


@dataclass(frozen=True)
class FolderScope:
    """A set of folder patterns (see the module docstring); hashable, so views can be memoised
    by scope. Build it with :meth:`of`, which checks and normalises the patterns."""

    patterns: tuple[str, ...]

    @classmethod
    def of(cls, patterns: tuple[str, ...] | list[str]) -> FolderScope:
        """Raises ``ValueError`` naming the first pattern that is not one."""
        for pattern in patterns:
            problem = pattern_problem(pattern)
            if problem is not None:
                raise ValueError(f"{pattern!r}: {problem}")
        normal = {_ALL if p == "." else p for p in patterns}
        return cls(tuple(sorted(normal)))

    @property
    def everything(self) -> bool:
        return _ALL in self.patterns

    def reads_file(self, path: str) -> bool:
        """Whether the file (or entry) at ``path`` is in scope: its folder is."""
        return self.reads_folder(posixpath.dirname(path))

    def reads_folder(self, folder: str) -> bool:
        """Whether ``folder`` (``""`` for the root) is in scope itself."""
        return _folder_in(self.patterns, folder)


def _folder_in(patterns: tuple[str, ...], folder: str) -> bool:
    if _ALL in patterns:
        return True
    if folder == "":
        return _ROOT in patterns
    segments = folder.split("/")
    for pattern in patterns:
        if pattern == _ROOT:
            continue
        parts = pattern.split("/")
        # In scope when the folder or one of its ancestors matches the pattern whole.
        if any(_match(parts, segments[:k]) for k in range(1, len(segments) + 1)):
            return True
    return False


def _match(parts: list[str], segments: list[str]) -> bool:
    """Whether the pattern ``parts`` matches the folder ``segments`` exactly."""
    if not parts:
        return not segments
    head, rest = parts[0], parts[1:]
    if head == _ALL:
        return any(_match(rest, segments[k:]) for k in range(len(segments) + 1))
    if not segments:
        return False
    return _segment(head, segments[0]) and _match(rest, segments[1:])


def _segment(pattern: str, name: str) -> bool:
    if _GLOB_CHARS.isdisjoint(pattern):
        return pattern == name
    return fnmatch.fnmatchcase(name, pattern)


EVERYTHING = FolderScope((_ALL,))
NOTHING = FolderScope(())


@dataclass(frozen=True)
class Access:
    """What one reader may read and write. A file is writable when it is in both scopes: a
    reader never writes what it cannot read back."""

    read: FolderScope = EVERYTHING
    write: FolderScope = EVERYTHING

    def may_write(self, path: str) -> bool:
        return self.write.reads_file(path) and self.read.reads_file(path)


FULL_ACCESS = Access()
