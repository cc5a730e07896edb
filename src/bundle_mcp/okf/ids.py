"""Canonical concept IDs (docs/DESIGN.md §1): the bundle-relative path without ``.md``.

:func:`concept_id_problem` is the one rule for what a concept ID may be. The loader applies it to
every concept file it finds (a file whose name breaks it is an unparseable document, reported by
the validator and never listed), every tool applies it to the IDs it is given, and the write path
applies it before staging anything, so a listed ID is always addressable and a write never fails
half-way on a name the file system refuses.
"""

from __future__ import annotations

import re

from ..limits import MAX_PATH_BYTES, NAME_MAX_BYTES

MAX_ID_LENGTH = 4096
# C0 and C1 controls, as the contract's concept_id pattern excludes them.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_URI_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")
RESERVED_STEMS = ("index", "log")


def concept_id_problem(value: str, *, allow_reserved_names: bool = False) -> str | None:
    """Why ``value`` is not a canonical concept ID, or ``None`` when it is.

    Only the last segment may not be ``index`` or ``log`` (docs/DESIGN.md §8): a folder called
    ``log/`` may hold concepts.
    """
    if not value:
        return "the ID is empty"
    if len(value) > MAX_ID_LENGTH:
        return f"the ID is longer than {MAX_ID_LENGTH} characters"
    if value != value.strip():
        return "the ID has leading or trailing whitespace"
    try:
        path_bytes = len(value.encode("utf-8")) + len(".md")
    except UnicodeEncodeError:
        return "the ID is not valid Unicode (it contains an unpaired surrogate)"
    if path_bytes > MAX_PATH_BYTES:
        return f"the file path would be longer than {MAX_PATH_BYTES} bytes"
    if _CONTROL.search(value):
        return "the ID contains a control character"
    if value.startswith("/") or value.endswith("/"):
        return "the ID must not start or end with '/'"
    if "//" in value:
        return "the ID must not contain '//'"
    if "\\" in value:
        return "the ID must not contain '\\'"
    if ":" in value:
        return "the ID must not contain ':'"
    if value.endswith(".md"):
        return "the ID must not end in '.md'"
    segments = value.split("/")
    for segment in segments:
        if segment in (".", ".."):
            return "the ID must not contain '.' or '..' segments"
        if segment.startswith("."):
            return "no ID segment may start with '.'"
    if any(len(s.encode("utf-8")) > NAME_MAX_BYTES for s in segments[:-1]):
        return f"a folder name would be longer than {NAME_MAX_BYTES} bytes"
    if len(segments[-1].encode("utf-8")) + len(".md") > NAME_MAX_BYTES:
        return f"the file name (with '.md') would be longer than {NAME_MAX_BYTES} bytes"
    if not allow_reserved_names and segments[-1] in RESERVED_STEMS:
        return f"'{segments[-1]}' names a reserved file, not a concept"
    return None


def concept_id_for_path(path: str) -> str:
    """``tables/orders.md`` → ``tables/orders``."""
    return path[:-3] if path.endswith(".md") else path


def path_for_concept_id(concept_id: str) -> str:
    return concept_id + ".md"
