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


def _within(pattern: str, other: str) -> bool:
    """Whether every folder ``pattern`` names is one ``other`` names (read as a folder path,
    ``pattern`` is in ``other``'s scope). Only used to tidy and to meet patterns."""
    if pattern == other or other == _ALL:
        return True
    if _ROOT in (pattern, other) or pattern == _ALL:
        return False
    return _folder_in((other,), pattern)


def _meet(write: str, read: str) -> str | None:
    """The folders both patterns name, as one pattern (``None``: none). Neither is ``**``."""
    if _within(write, read):
        return write
    if _within(read, write):
        return read
    if _ROOT in (write, read):
        return None  # "/" names the root's own files; no other pattern names the root
    ws, rs = write.split("/"), read.split("/")
    if _ALL in ws or _ALL in rs:
        return write  # not one pattern: the write pattern stands for it (see writable_patterns)
    out: list[str] = []
    for a, b in zip(ws, rs, strict=False):
        segment = _meet_segment(a, b)
        if segment is None:
            return None
        out.append(segment)
    longer = ws if len(ws) > len(rs) else rs
    return "/".join(out + longer[len(out):])


def _meet_segment(write: str, read: str) -> str | None:
    if write == read:
        return write
    write_glob, read_glob = not _GLOB_CHARS.isdisjoint(write), not _GLOB_CHARS.isdisjoint(read)
    if not write_glob and not read_glob:
        return None
    if not write_glob:
        return write if fnmatch.fnmatchcase(write, read) else None
    if not read_glob:
        return read if fnmatch.fnmatchcase(read, write) else None
    if write == "*":
        return read
    return write  # two globs: "*" narrows to the other; else the write one stands for both


def _reduced(patterns: tuple[str, ...]) -> tuple[str, ...]:
    """Sorted, without a pattern another one already covers."""
    unique = sorted(set(patterns))
    return tuple(p for p in unique if not any(q != p and _within(p, q) for q in unique))


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

    def writable_patterns(self) -> tuple[str, ...]:
        """The folders this reader may write, as patterns: the write scope within the read
        scope, so that a refusal naming them names nothing the reader cannot see.

        Exact for the usual patterns (literal folders, ``*`` segments, ``/`` and ``**``). Where
        two patterns meet in a way no single pattern says (two different globs in one segment,
        a ``**`` inside a pattern), the write pattern stands for the meeting: a pattern from the
        reader's own configuration, never a file's name.
        """
        if self.write.everything:
            met = self.read.patterns
        elif self.read.everything:
            met = self.write.patterns
        else:
            found = (_meet(w, r) for w in self.write.patterns for r in self.read.patterns)
            met = tuple(p for p in found if p is not None)
        return _reduced(met)


FULL_ACCESS = Access()
