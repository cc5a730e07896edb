"""Canonical concept IDs (DESIGN.md §1): the bundle-relative path without ``.md``."""

from __future__ import annotations

import re

MAX_ID_LENGTH = 4096
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_URI_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")
RESERVED_STEMS = ("index", "log")


def concept_id_problem(value: str, *, allow_reserved_names: bool = False) -> str | None:
    """Why ``value`` is not a canonical concept ID, or ``None`` when it is.

    Only the last segment may not be ``index`` or ``log`` (DESIGN.md §8): a folder called
    ``log/`` may hold concepts.
    """
    if not value:
        return "the ID is empty"
    if len(value) > MAX_ID_LENGTH:
        return f"the ID is longer than {MAX_ID_LENGTH} characters"
    if value != value.strip():
        return "the ID has leading or trailing whitespace"
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
    if not allow_reserved_names and segments[-1] in RESERVED_STEMS:
        return f"'{segments[-1]}' names a reserved file, not a concept"
    return None


def concept_id_for_path(path: str) -> str:
    """``tables/orders.md`` → ``tables/orders``."""
    return path[:-3] if path.endswith(".md") else path


def path_for_concept_id(concept_id: str) -> str:
    return concept_id + ".md"
