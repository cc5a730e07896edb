"""Helpers shared by the read tools: folding, ID lookup, limits, sources and legacy fallbacks."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, TypeVar

from ..cancel import CancelToken
from ..errors import (
    CONCEPT_NOT_FOUND,
    BundleError,
    invalid_input,
    invalid_request,
    recovery_step,
    resource_limit,
)
from ..model import Document, Snapshot
from ..okf.citations import citations_section, file_lines
from ..okf.ids import concept_id_problem
from ..okf.properties import card_of
from ..okf.suggest import did_you_mean_diagnostics
from ..okf.temporal import Reference

DEFAULT_LIMIT = 20
MAX_LIMIT = 100
MIB = 1024 * 1024


def invalid_field(field: str, message: str) -> BundleError:
    """``invalid_request`` with one ``invalid_input`` diagnostic naming the argument."""
    return invalid_request(
        message, invalid_input(field, message)
    )


FIND_THE_ID = (
    "find the canonical ID with search_concepts (a distinctive literal from its title or path) "
    "or list_concepts, then retry with that exact ID"
)


def require_concept(
    snapshot: Snapshot,
    concept_id: str,
    field: str = "$.concept_id",
    token: CancelToken | None = None,
) -> Document:
    """The concept named by a canonical ID, given in the argument at JSON path ``field``.

    Raises:
        BundleError: ``invalid_request`` for a non-canonical ID, ``concept_not_found`` (with
            ``did_you_mean`` suggestions, :func:`concept_not_found`) when the snapshot has no
            such concept.
    """
    problem = concept_id_problem(concept_id)
    if problem is not None:
        name = field.removeprefix("$.")
        raise invalid_field(field, f"{name} is not a canonical concept ID: {problem}")
    doc = snapshot.concepts.get(concept_id)
    if doc is None:
        raise concept_not_found(
            snapshot, concept_id, field, "no concept with this ID in the bundle", FIND_THE_ID,
            token=token,
        )
    return doc


def concept_not_found(
    snapshot: Snapshot,
    requested: str,
    field: str,
    message: str,
    step: str,
    *,
    project: str | None = None,
    token: CancelToken | None = None,
) -> BundleError:
    """``concept_not_found`` for the ID at ``field``: the recovery step, then the suggestions.

    ``requested`` is the text suggestions are found for (a locator's concept part, say).
    """
    return BundleError(
        CONCEPT_NOT_FOUND,
        message,
        (recovery_step(step),
         *did_you_mean_diagnostics(snapshot, requested, field, project=project,
                                   check=None if token is None else token.check)),
    )


def limit_from(params: Mapping[str, Any]) -> int:
    """``limit`` with its default; out-of-range values are rejected, never clamped.

    The input contract already enforces 1-100; this guards direct callers.
    """
    limit = params.get("limit", DEFAULT_LIMIT)
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise invalid_field("$.limit", "limit must be an integer from 1 to 100")
    if limit > MAX_LIMIT:
        raise resource_limit(
            f"limit {limit} is above the maximum of {MAX_LIMIT}",
            f"use limit {MAX_LIMIT} or less and a more specific query; there is no cursor",
        )
    return limit


class Cards:
    """Concept cards of one call, built once per concept."""

    def __init__(self, snapshot: Snapshot, ref: Reference) -> None:
        self._snapshot = snapshot
        self._ref = ref
        self._cards: dict[str, dict[str, Any]] = {}

    def get(self, concept_id: str) -> dict[str, Any]:
        found = self._cards.get(concept_id)
        if found is None:
            snapshot = self._snapshot
            found = card_of(concept_id, snapshot.concept_path(concept_id),
                            snapshot.fields_of(concept_id), self._ref)
            self._cards[concept_id] = found
        # A fresh copy per use: the result is plain data that callers may serialise or mutate.
        return {**found, "tags": list(found["tags"]), "status_state": dict(found["status_state"])}


_D = TypeVar("_D")


def string_or(value: object, default: _D) -> str | _D:
    return value if isinstance(value, str) else default


def frontmatter_sources(fm: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The ``sources[]`` entries that can be projected: mappings with a string ``resource``."""
    value = fm.get("sources")
    if not isinstance(value, tuple):
        return []
    return [s for s in value if isinstance(s, Mapping) and isinstance(s.get("resource"), str)]


# v0.1 citations: one item per non-blank, non-indented line of the `# Citations` section.
_LIST_MARKER = re.compile(r"(?:[-*+]|[0-9]{1,9}[.)])(?:[ \t]+|$)")
_LABEL = re.compile(r"\[\^?([^\]\s][^\]]*)\]:?[ \t]*(?!\()")
_SUBHEADING = re.compile(r"#{2,6}(?:[ \t]|$)")  # the section runs to the next level-1 heading
_LINK = re.compile(r"\[([^\]]*)\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


def citation_sources(doc: Document) -> list[dict[str, str]]:
    """Sources of a v0.1 body ``# Citations`` section (``okf.citations``), in document order.

    Each non-blank line of the section that is not indented (indented lines continue the item
    above) is one citation. A leading list marker is dropped; a leading ``[label]`` or
    ``[^label]:`` becomes the ``id``; the first Markdown link gives ``resource`` (its
    destination) and ``title`` (its text); without a link the remaining text is the resource.
    """
    section = citations_section(doc)
    if section is None:
        return []
    _, first, last = file_lines(doc, section)
    out: list[dict[str, str]] = []
    in_fence = False
    for line in doc.lines[first - 1 : last]:
        stripped = line.strip()
        if stripped.startswith(("```", "~~~")):
            in_fence = not in_fence
            continue
        if in_fence or not stripped or line[:1] in (" ", "\t") or _SUBHEADING.match(line):
            continue
        text = stripped
        marker = _LIST_MARKER.match(text)
        if marker:
            text = text[marker.end() :]
        source_id = ""
        label = _LABEL.match(text)
        if label:
            source_id = label.group(1).strip()
            text = text[label.end() :]
        link = _LINK.search(text)
        if link:
            resource, title = link.group(2), link.group(1).strip()
        else:
            resource, title = text.strip(), ""
        if resource:
            out.append({"id": source_id, "resource": resource, "title": title})
    return out


def legacy_generated_at(doc: Document, legacy: bool) -> tuple[str | None, bool]:
    """``(generated.at, derived_from_timestamp)``.

    ``timestamp`` stands in for ``generated.at`` only in a v0.1 bundle whose concept has no
    ``generated`` key at all.
    """
    fm = doc.fm
    generated = fm.get("generated")
    if isinstance(generated, Mapping):
        return string_or(generated.get("at"), None), False
    if "generated" not in fm and legacy and isinstance(fm.get("timestamp"), str):
        return fm["timestamp"], True
    return None, False
