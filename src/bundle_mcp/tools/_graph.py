"""What the traversal verbs share: entities, names, previews, bounds and the per-call graph view.

A bundle has two kinds of entity (DESIGN.md §3): a *concept* (a memory; its ID is the concept ID)
and a *section* (a span; its ID is its locator ``<percent-encoded path>#L<start>-L<end>``). Four
kinds of edge join them: ``LINKS_TO`` (a resolved navigation link), a typed relation under its
declared name, ``PART_OF`` (section → its concept) and ``SHARES_COMMUNITY`` (two concepts that
carry a common tag).

Nothing here is cached between calls: the graph view is built from the snapshot's own memoised
edges for one call and dropped with it, so a new snapshot can never see an old adjacency.
"""

from __future__ import annotations

import bisect
import re
import types
from collections.abc import Iterator, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from ..cancel import CancelToken
from ..model import Document, Section, Snapshot
from ..okf.ids import concept_id_problem
from ..okf.names import concept_name
from ..okf.properties import tags as concept_tags
from ..okf.properties import text_field
from ._common import invalid_field
from .search_sections import locator

LINKS_TO = "LINKS_TO"
PART_OF = "PART_OF"
SHARES_COMMUNITY = "SHARES_COMMUNITY"
OUTGOING = "outgoing"
INCOMING = "incoming"

# Weights of the four edge kinds: a declared relation is an author's explicit statement, a link
# is navigation the author chose, a section is part of what was already found, and a shared tag
# is the weakest evidence of relatedness. Each further hop halves the score, so a relation two
# hops away (0.5) still outranks a shared tag next door (0.4).
RELATION_WEIGHT = 1.0
LINKS_TO_WEIGHT = 0.8
PART_OF_WEIGHT = 0.6
COMMUNITY_WEIGHT = 0.4
DEPTH_DECAY = 0.5

SECTION_TYPE = "section"
PREAMBLE_NAME = "(preamble)"
ELLIPSIS = "…"
BREADCRUMB_SEPARATOR = " > "

_LOCATOR_SUFFIX = re.compile(r"#L([1-9][0-9]{0,9})-L([1-9][0-9]{0,9})\Z")
_NON_SPACE = re.compile(r"\S+")
_SPACES = (" ", "\t", "\n", "\r", "\f", "\v")


# --------------------------------------------------------------------------------------------
# Entities


@dataclass(frozen=True, slots=True)
class Entity:
    """A concept, or one section of a concept (``section`` set; ``id`` is then its locator)."""

    id: str
    doc: Document
    section: Section | None = None

    @property
    def concept_id(self) -> str:
        concept_id = self.doc.concept_id
        assert concept_id is not None  # only concepts are ever wrapped
        return concept_id

    @property
    def is_section(self) -> bool:
        return self.section is not None


def concept_entity(doc: Document) -> Entity:
    # Kept with the document: a dense walk builds the same entity thousands of times.
    return doc.memo.get("graph-entity", lambda: Entity(doc.concept_id or "", doc))


def section_entity(doc: Document, section: Section) -> Entity:
    return Entity(locator(doc.path, section.line_start, section.line_end), doc, section)


def resolve(snapshot: Snapshot, value: str, project: str | None) -> Entity | None:
    """The entity an ID names in this snapshot, or ``None``.

    A concept ID wins over a locator reading of the same text (``a.md#L1-L2`` can be both). A
    locator resolves only when its line range is exactly one section of the current snapshot:
    a stale range after an edit names nothing. The path part may be percent-encoded (as
    search_sections writes it) or plain. Outside ``project`` nothing resolves, so a scoped
    caller cannot tell "elsewhere" from "absent".
    """
    doc = snapshot.concepts.get(value)
    if doc is not None:
        return concept_entity(doc) if in_project(doc.path, project) else None
    match = _LOCATOR_SUFFIX.search(value)
    if match is None:
        return None
    prefix = value[: match.start()]
    start, end = int(match.group(1)), int(match.group(2))
    for path in _path_readings(prefix):
        doc = _concept_at(snapshot, path)
        if doc is None or not in_project(doc.path, project):
            continue
        section = section_at(doc, start, end)
        if section is not None:
            return section_entity(doc, section)
    return None


def _path_readings(prefix: str) -> tuple[str, ...]:
    """The percent-decoded path first, then the text as written (a file name may hold '%')."""
    try:
        decoded = unquote(prefix, errors="strict")
    except UnicodeDecodeError:  # '%FF' and the like decode to no path at all
        return (prefix,)
    return (decoded,) if decoded == prefix else (decoded, prefix)


def _concept_at(snapshot: Snapshot, path: str) -> Document | None:
    if not path.endswith(".md"):
        return None
    doc = snapshot.concepts.get(path[:-3])
    return doc if doc is not None and doc.path == path else None


def section_at(doc: Document, line_start: int, line_end: int) -> Section | None:
    """The section spanning exactly these lines (sections are sorted by start line)."""
    sections = doc.markdown.sections
    at = bisect.bisect_left(sections, line_start, key=lambda s: s.line_start)
    if at < len(sections) and sections[at].line_start == line_start:
        if sections[at].line_end == line_end:
            return sections[at]
    return None


def is_sliced(doc: Document) -> bool:
    """A concept with fewer than two sections was never cut: it is its own only span."""
    return len(doc.markdown.sections) > 1


# --------------------------------------------------------------------------------------------
# Names, types, projects


def section_name(section: Section) -> str:
    return section.heading if section.heading else PREAMBLE_NAME


def entity_name(entity: Entity) -> str:
    if entity.section is not None:
        return section_name(entity.section)
    return concept_name(entity.doc)


def entity_type(entity: Entity) -> str:
    return SECTION_TYPE if entity.is_section else text_field(entity.doc.fm, "type")


def breadcrumb(section: Section) -> str | None:
    return BREADCRUMB_SEPARATOR.join(section.breadcrumb) if section.breadcrumb else None


def project_id(path: str) -> str | None:
    """The top folder of a bundle path; ``None`` for a file at the root."""
    head, sep, _rest = path.partition("/")
    return head if sep else None


def in_project(path: str, project: str | None) -> bool:
    return project is None or path.startswith(project + "/")


def project_from(snapshot: Snapshot, params: Mapping[str, Any]) -> str | None:
    """The ``project`` argument: a folder of the bundle, or ``None`` when not given.

    Raises:
        BundleError: ``invalid_request`` when it is not a clean bundle-relative folder path
            that exists in this snapshot.
    """
    value = params.get("project")
    if value is None:
        return None
    if not isinstance(value, str) or concept_id_problem(value, allow_reserved_names=True):
        raise invalid_field(
            "$.project", "project must be a clean bundle-relative folder path such as 'tables'"
        )
    if value not in snapshot.directories:
        raise invalid_field("$.project", "project does not name a folder of this bundle")
    return value


# --------------------------------------------------------------------------------------------
# Bounds and text


def clamped(params: Mapping[str, Any], name: str, default: int, low: int, high: int) -> int:
    """An integer argument clamped into ``[low, high]``; absent means ``default``.

    The seed-000 verbs clamp instead of rejecting (a tool signature cannot state a range); a
    value of the wrong type is still malformed input.
    """
    value = params.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise invalid_field(f"$.{name}", f"{name} must be an integer")
    return max(low, min(value, high))


def clip(text: str, max_chars: int) -> tuple[str, bool]:
    """``text`` cut to at most ``max_chars`` characters, marker included, and whether it cut.

    The cut falls on the last whitespace that keeps at least half of the room, and the result
    ends with ``…``; a text with no such boundary (one long word or URL) is cut hard rather
    than dropped. With no room at all the result is empty.
    """
    if len(text) <= max_chars:
        return text, False
    if max_chars <= 0:
        return "", True
    room = max_chars - len(ELLIPSIS)
    cut = max(text.rfind(ch, 0, room + 1) for ch in _SPACES)
    if cut < room // 2:
        cut = room
    return text[:cut].rstrip() + ELLIPSIS, True


def preview(text: str, max_chars: int) -> tuple[str, bool]:
    """A whitespace-collapsed preview of ``text`` within ``max_chars`` (see :func:`clip`).

    Words are read lazily, so a 16 MiB body costs as much as its first ``max_chars`` characters.
    """
    words: list[str] = []
    length = 0
    for match in _NON_SPACE.finditer(text):
        word = match.group()
        length += len(word) + (1 if words else 0)
        words.append(word)
        if length > max_chars:
            return clip(" ".join(words), max_chars)
    return " ".join(words), False


def section_text(doc: Document, section: Section) -> str:
    """The physical lines of a section, heading line included (as search_sections reads it)."""
    return "\n".join(doc.lines[section.line_start - 1 : section.line_end])


def body_text(doc: Document) -> str:
    """The body's physical lines (after the frontmatter), line ends normalised to ``\\n``."""
    return "\n".join(doc.lines[doc.body_line - 1 :])


# --------------------------------------------------------------------------------------------
# The graph view of one call


@dataclass(frozen=True, slots=True)
class Step:
    """One edge seen from the entity being expanded.

    ``edge_from``/``edge_to`` are the edge's own ends in its stored direction: for a typed
    relation the escaped references with their fragments (``source#intro`` → ``target#part``),
    so an edge between sub-resources never loses an end when it is reported between concepts.
    """

    target: Entity
    relationship: str
    direction: str
    weight: float
    edge_from: str
    edge_to: str


class WalkBudget:
    """How many edges one call may still examine; the walk stops when it reaches zero.

    Mutable on purpose and owned by one call: it is the single counter every step generator
    of that call draws from, so the cap bounds the whole walk rather than each node.
    """

    __slots__ = ("remaining",)

    def __init__(self, edges: int) -> None:
        self.remaining = edges

    @property
    def exhausted(self) -> bool:
        return self.remaining <= 0

    def take(self) -> bool:
        if self.remaining <= 0:
            return False
        self.remaining -= 1
        return True


@dataclass(frozen=True)
class GraphView:
    """The adjacency of one call: which edges may be walked, computed per entity on demand.

    ``relationships`` holds the upper-cased names the caller allowed (``None``: all of them).
    ``tag_members`` maps each tag to the IDs of the in-scope concepts carrying it, sorted; it is
    built only when SHARES_COMMUNITY may be walked, and the pairs themselves are never
    materialised (a tag on 10,000 concepts would be 50 million pairs).
    """

    snapshot: Snapshot
    project: str | None
    relationships: frozenset[str] | None
    include_incoming: bool
    tag_members: Mapping[str, tuple[str, ...]]

    @classmethod
    def build(
        cls,
        snapshot: Snapshot,
        project: str | None,
        relationships: frozenset[str] | None,
        include_incoming: bool,
        token: CancelToken,
    ) -> GraphView:
        frozen: Mapping[str, tuple[str, ...]] = types.MappingProxyType({})
        if relationships is None or SHARES_COMMUNITY in relationships:
            # The tag index depends only on the snapshot and the project: build it once.
            frozen = snapshot.memo.get(
                ("graph-tag-members", project),
                lambda: _tag_members(snapshot, project, token),
            )
        return cls(snapshot, project, relationships, include_incoming, frozen)

    def allows(self, relationship: str) -> bool:
        return self.relationships is None or relationship.upper() in self.relationships

    def steps(
        self,
        entity: Entity,
        budget: WalkBudget,
        token: CancelToken,
        visited: AbstractSet[str] = frozenset(),
        *,
        community: bool = True,
    ) -> Iterator[Step]:
        """Every walkable edge of ``entity`` in a fixed order, one budget unit per edge looked at.

        Edges to concepts in ``visited`` are paid for but not yielded (building a step for a
        node the walk already holds is most of the cost in a dense community). Stops early,
        without error, when the budget runs out; the caller reads ``budget.exhausted``.
        """
        if entity.section is not None:
            # A section's only edge is PART_OF to the concept it was cut from.
            token.check()
            if budget.take() and self.allows(PART_OF):
                yield Step(
                    concept_entity(entity.doc), PART_OF, OUTGOING, PART_OF_WEIGHT,
                    entity.id, entity.concept_id,
                )
            return
        yield from self._edge_steps(entity, budget, token, visited)
        yield from self._section_steps(entity, budget, token)
        if community:
            yield from self._community_steps(entity, budget, token, visited)

    def _edge_steps(
        self, entity: Entity, budget: WalkBudget, token: CancelToken, visited: AbstractSet[str]
    ) -> Iterator[Step]:
        concept_id = entity.concept_id
        concepts = self.snapshot.concepts
        for edge in self.snapshot.edges_by_concept.get(concept_id, ()):
            token.check()
            if not budget.take():
                return
            if edge.source_id == edge.target_id:
                continue  # a concept is not its own neighbour
            if edge.source_id == concept_id:
                other, direction = edge.target_id, OUTGOING
            elif self.include_incoming:
                other, direction = edge.source_id, INCOMING
            else:
                continue
            if other in visited:
                continue
            if edge.kind == "navigation":
                name, weight = LINKS_TO, LINKS_TO_WEIGHT
            else:
                name, weight = edge.relation_type or "", RELATION_WEIGHT
            doc = concepts[other]
            if not self.allows(name) or not in_project(doc.path, self.project):
                continue
            yield Step(concept_entity(doc), name, direction, weight, edge.source_ref,
                       edge.target_ref)

    def _section_steps(
        self, entity: Entity, budget: WalkBudget, token: CancelToken
    ) -> Iterator[Step]:
        # PART_OF points from a section to its concept, so a concept reaches its sections only
        # over incoming edges; an unsliced concept has no sections of its own to offer.
        if not (self.include_incoming and self.allows(PART_OF) and is_sliced(entity.doc)):
            return
        for section in entity.doc.markdown.sections:
            token.check()
            if not budget.take():
                return
            target = section_entity(entity.doc, section)
            yield Step(target, PART_OF, INCOMING, PART_OF_WEIGHT, target.id, entity.id)

    def _community_steps(
        self, entity: Entity, budget: WalkBudget, token: CancelToken, visited: AbstractSet[str]
    ) -> Iterator[Step]:
        if not self.allows(SHARES_COMMUNITY):
            return
        concept_id = entity.concept_id
        concepts = self.snapshot.concepts
        for tag in sorted(set(concept_tags(entity.doc.fm))):
            for other in self.tag_members.get(tag, ()):
                token.check()
                if not budget.take():
                    return
                if other == concept_id or other in visited:
                    continue
                # Sharing a tag has no direction; it is reported as leaving the expanded node.
                yield Step(concept_entity(concepts[other]), SHARES_COMMUNITY, OUTGOING,
                           COMMUNITY_WEIGHT, concept_id, other)


def _tag_members(
    snapshot: Snapshot, project: str | None, token: CancelToken
) -> Mapping[str, tuple[str, ...]]:
    members: dict[str, list[str]] = {}
    for concept_id, doc in snapshot.concepts.items():  # sorted by ID
        token.check()
        if in_project(doc.path, project):
            for tag in dict.fromkeys(concept_tags(doc.fm)):
                members.setdefault(tag, []).append(concept_id)
    return types.MappingProxyType({k: tuple(v) for k, v in members.items()})


def shared_tags(a: Document, b: Document) -> list[str]:
    """The tags two concepts have in common, sorted."""
    return sorted(set(concept_tags(a.fm)) & set(concept_tags(b.fm)))
