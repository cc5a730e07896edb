"""Typed relations (the toolkit's frontmatter extension) and the reference grammar.

A reference is ``<escaped-concept-id>[#<fragment>]``: ``\\#`` is a ``#`` that belongs to the
ID, the first unescaped ``#`` starts the fragment, and after it ``\\`` is an ordinary character.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import WARN, BundleMcpError, Diagnostic
from ..model import Relation
from .ids import concept_id_problem

RELATION_TYPE = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
RESERVED_RELATION_TYPES = frozenset(
    {
        "bundle", "description", "exists", "is_part_of", "okf", "references", "resource",
        "tags", "target", "timestamp", "title", "type",
    }
)
_URI_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class BadReference(BundleMcpError, ValueError):
    """A relation target that breaks the reference grammar."""


@dataclass(frozen=True, slots=True)
class Reference:
    concept_id: str
    fragment: str | None


def escape_id(concept_id: str) -> str:
    """The reference spelling of an ID: each ``#`` becomes ``\\#``."""
    return concept_id.replace("#", "\\#")


def format_reference(concept_id: str, fragment: str | None) -> str:
    return escape_id(concept_id) + ("" if fragment is None else "#" + fragment)


def parse_reference(ref: str) -> Reference:
    """Parse an escaped reference; raise :class:`BadReference` when it breaks the grammar."""
    if not ref:
        raise BadReference("reference is empty")
    if ref != ref.strip():
        raise BadReference("reference has surrounding whitespace")
    if ref.startswith(("/", "./", "../")):
        raise BadReference("reference must be a concept ID, not a path")
    if _URI_SCHEME.match(ref):
        raise BadReference("reference must not be a URI")
    if "\\" not in ref:
        # No escapes (nearly every reference): the first '#' starts the fragment.
        concept_id, hash_sign, rest = ref.partition("#")
        return _checked(concept_id, rest if hash_sign else None)
    id_chars: list[str] = []
    fragment: str | None = None
    i = 0
    while i < len(ref):
        ch = ref[i]
        if ch == "\\":
            if ref[i + 1 : i + 2] == "#":
                id_chars.append("#")
                i += 2
                continue
            raise BadReference("'\\' may only escape '#' in the concept part")
        if ch == "#":
            fragment = ref[i + 1 :]
            break
        id_chars.append(ch)
        i += 1
    return _checked("".join(id_chars), fragment)


def _checked(concept_id: str, fragment: str | None) -> Reference:
    problem = concept_id_problem(concept_id, allow_reserved_names=False)
    if problem:
        raise BadReference(f"concept part is not a canonical ID: {problem}")
    if fragment is not None:
        if not fragment:
            raise BadReference("fragment after '#' is empty")
        if fragment != fragment.strip():
            raise BadReference("fragment has surrounding whitespace")
        if "#" in fragment:
            raise BadReference("fragment contains '#'")
        if _CONTROL.search(fragment):
            raise BadReference("fragment contains a control character")
    return Reference(concept_id, fragment)


def extract_relations(
    concept_id: str, frontmatter: Mapping[str, Any], path: str
) -> tuple[tuple[Relation, ...], tuple[Diagnostic, ...]]:
    """Every relation of a concept: top-level, then nested under mappings with ``id``/``anchor``.

    Identical (source, type, target) triples collapse to one edge (docs/DESIGN.md §8). Problems are
    returned as WARN diagnostics for validate; a broken entry is skipped, never guessed at.
    """
    relations: dict[tuple[str, str, str], Relation] = {}
    problems: list[Diagnostic] = []
    source = escape_id(concept_id)
    top = frontmatter.get("relations")
    if top is not None:
        _read_block(source, top, path, "relations", relations, problems)
    for key, value in frontmatter.items():
        if key == "relations":
            continue
        _walk_nested(concept_id, value, path, key, relations, problems)
    ordered = sorted(relations.values(), key=lambda r: (r.source, r.relation_type, r.target))
    return tuple(ordered), tuple(problems)


def _walk_nested(
    concept_id: str,
    value: Any,
    path: str,
    field: str,
    out: dict[tuple[str, str, str], Relation],
    problems: list[Diagnostic],
) -> None:
    if isinstance(value, Mapping):
        block = value.get("relations")
        if block is not None:
            fragment = _subresource_id(value)
            if fragment is None:
                problems.append(
                    _problem(path, f"{field}.relations", "nested relations need a string "
                             "'id' or 'anchor' on the same mapping; ignored")
                )
            else:
                source = format_reference(concept_id, fragment)
                _read_block(source, block, path, f"{field}.relations", out, problems)
        for key, child in value.items():
            if key != "relations":
                _walk_nested(concept_id, child, path, f"{field}.{key}", out, problems)
    elif isinstance(value, (list, tuple)):
        for i, child in enumerate(value):
            _walk_nested(concept_id, child, path, f"{field}[{i}]", out, problems)


def _subresource_id(mapping: Mapping[str, Any]) -> str | None:
    for key in ("id", "anchor"):
        value = mapping.get(key)
        if isinstance(value, str) and value and value == value.strip() and "#" not in value \
                and not _CONTROL.search(value):
            return value
    return None


def _read_block(
    source: str,
    block: Any,
    path: str,
    field: str,
    out: dict[tuple[str, str, str], Relation],
    problems: list[Diagnostic],
) -> None:
    if not isinstance(block, Mapping):
        problems.append(_problem(path, field, "'relations' must be a mapping of relation types"))
        return
    for relation_type, items in block.items():
        where = f"{field}.{relation_type}"
        if not RELATION_TYPE.fullmatch(relation_type):
            problems.append(_problem(path, where, f"relation type {relation_type!r} must match "
                                     "[A-Za-z][A-Za-z0-9_]*; ignored"))
            continue
        if relation_type in RESERVED_RELATION_TYPES:
            problems.append(_problem(path, where, f"relation type {relation_type!r} is reserved; "
                                     "ignored"))
            continue
        if not isinstance(items, (list, tuple)):
            problems.append(_problem(path, where, "a relation type must list {target: ref} "
                                     "mappings"))
            continue
        for i, item in enumerate(items):
            target = item.get("target") if isinstance(item, Mapping) else None
            if not isinstance(target, str):
                problems.append(_problem(path, f"{where}[{i}]", "relation entry needs a string "
                                         "'target'"))
                continue
            try:
                ref = parse_reference(target)
            except BadReference as exc:
                problems.append(_problem(path, f"{where}[{i}].target",
                                         f"invalid relation target {target!r}: {exc}"))
                continue
            # Interned: a bundle's relations name the same concepts and types over and over
            # (the target is also the frozen frontmatter's string: model.freeze interns it).
            fragment = ref.fragment
            rel = Relation(source, sys.intern(relation_type), sys.intern(target),
                           sys.intern(ref.concept_id),
                           None if fragment is None else sys.intern(fragment))
            out.setdefault((source, relation_type, target), rel)


def _problem(path: str, field: str, message: str) -> Diagnostic:
    return Diagnostic(code="invalid_relation", severity=WARN, file=path, field=field,
                      message=message)


def retarget_relations(
    frontmatter: dict[str, Any], concept_id: str, new_id: str | None
) -> list[str]:
    """Point every relation of ``frontmatter`` (JSON-native data, changed in place) that targets
    ``concept_id`` at ``new_id`` instead, keeping its fragment; ``new_id`` ``None`` drops the
    entry (and a relation type, or a whole ``relations`` block, left empty by it).

    Reads the blocks exactly as :func:`extract_relations` does (top-level, and nested under a
    mapping with an ``id`` or ``anchor``); an entry it skips is left alone. Returns where each
    changed entry was (``relations.depends_on[0].target``).
    """
    changed: list[str] = []
    top = frontmatter.get("relations")
    if isinstance(top, dict):
        _retarget_block(frontmatter, "relations", concept_id, new_id, changed)
    for key, value in list(frontmatter.items()):
        if key != "relations":
            _retarget_nested(value, key, concept_id, new_id, changed)
    return changed


def _retarget_nested(
    value: Any, field: str, concept_id: str, new_id: str | None, changed: list[str]
) -> None:
    if isinstance(value, dict):
        if isinstance(value.get("relations"), dict) and _subresource_id(value) is not None:
            _retarget_block(value, f"{field}.relations", concept_id, new_id, changed)
        for key, child in list(value.items()):
            if key != "relations":
                _retarget_nested(child, f"{field}.{key}", concept_id, new_id, changed)
    elif isinstance(value, list):
        for i, child in enumerate(value):
            _retarget_nested(child, f"{field}[{i}]", concept_id, new_id, changed)


def _retarget_block(
    holder: dict[str, Any], field: str, concept_id: str, new_id: str | None, changed: list[str]
) -> None:
    block = holder["relations"]
    for relation_type, items in list(block.items()):
        if (not isinstance(relation_type, str) or not RELATION_TYPE.fullmatch(relation_type)
                or relation_type in RESERVED_RELATION_TYPES or not isinstance(items, list)):
            continue
        kept: list[Any] = []
        for i, item in enumerate(items):
            target = item.get("target") if isinstance(item, dict) else None
            ref = _reference_or_none(target)
            if ref is None or ref.concept_id != concept_id:
                kept.append(item)
                continue
            changed.append(f"{field}.{relation_type}[{i}].target")
            if new_id is not None:
                item["target"] = format_reference(new_id, ref.fragment)
                kept.append(item)
        if len(kept) != len(items):
            if kept:
                block[relation_type] = kept
            else:
                del block[relation_type]
    if not block and changed:
        del holder["relations"]


def _reference_or_none(target: Any) -> Reference | None:
    if not isinstance(target, str):
        return None
    try:
        return parse_reference(target)
    except BadReference:
        return None
