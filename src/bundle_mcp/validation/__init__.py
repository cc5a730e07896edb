"""``validate``: conformance errors and guidance for a whole bundle, as one report.

A bundle full of broken files is still validated completely: each broken file is one ERROR with
its reason, and every other rule still runs on the files that parsed.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

from ..cancel import CancelToken
from ..derived import (
    Codec,
    Slot,
    keep_of_snapshot,
    kept,
    of_document,
    of_snapshot,
    unrevised_name,
)
from ..errors import ERROR, INFO, WARN, Diagnostic
from ..model import Document, Snapshot, revision_value
from ..okf.ids import concept_id_for_path
from ..okf.temporal import DATE_PROFILE, Reference
from ..okf.versions import resolve_version, version_declaration
from . import bundle, computations, concepts, fields, links, reserved
from .findings import VersionRules

_P = ParamSpec("_P")
_T = TypeVar("_T")


def _warm(check_links: bool) -> Callable[[Snapshot, CancelToken], None]:
    """The warm-up's build of the findings a validation with default arguments (and with
    ``check_links``) reads: what validate_bundle's first calls would build."""

    def warm(snapshot: Snapshot, token: CancelToken) -> None:
        options = ValidateOptions(Reference(DATE_PROFILE, None, None), check_links=check_links)
        rules = VersionRules.of(resolve_version(snapshot, options.target_version))
        for _finding in findings_for(snapshot, options, rules, token):
            pass

    return warm


def _warm_orphans(snapshot: Snapshot, token: CancelToken) -> None:
    token.check()
    orphan_findings(snapshot)


Findings = tuple[Diagnostic, ...]
def _encode_findings(findings: Findings) -> list[Any]:
    return [finding.as_row() for finding in findings]


def _decode_findings(rows: Any) -> Findings:
    if not isinstance(rows, list):
        raise TypeError("a list of findings")
    return tuple(Diagnostic.from_row(row) for row in rows)


def _encode_stale(date: concepts.StaleDate | None) -> list[Any] | None:
    return None if date is None else [date.path, date.value, date.line]


DOCUMENT_FINDINGS: Slot[Findings] = Slot(
    "document_findings", "document",
    "the findings of the rules that read one document, per strictness and OKF version; kept in "
    "the parse cache",
    _warm(check_links=False),
    Codec(1, _encode_findings, _decode_findings),
)
FIELD_FINDINGS: Slot[Findings] = Slot(
    "field_findings", "snapshot",
    "path-valued field and Attested Computation findings, per concept and --check-links (they "
    "read other files of the snapshot, so they cannot be kept with the document); warmed with "
    "the document findings and the link findings",
)
INDEX_FINDINGS: Slot[Findings] = Slot(
    "index_findings", "snapshot",
    "strict-mode index.md description mismatches, per index file",
)
LINK_FINDINGS: Slot[Findings] = Slot(
    "link_findings", "snapshot", "broken-link findings, per document; after an edit, a "
    "document's are its predecessor's when they cannot differ (_earlier_link_findings)",
    _warm(check_links=True), carried=True,
)
ORPHAN_FINDINGS: Slot[Findings] = Slot(
    "orphan_findings", "snapshot",
    "concepts their folder's index.md does not link, and folders without an index.md",
    _warm_orphans,
)
BUNDLE_FINDINGS: Slot[Findings] = Slot(
    "bundle_findings", "snapshot",
    "the findings of the rules over the whole bundle (collisions, the root index, log.md); "
    "warmed with the document findings",
)
FINDINGS_WALK: Slot[Walk] = Slot(
    "findings_walk", "snapshot",
    "every file's findings but staleness, in walk order, with the concepts that may be stale, "
    "per strictness, OKF version and --check-links: what each validation walks (built by the "
    "warm-up of the findings above)",
)
SLOTS = (DOCUMENT_FINDINGS, FIELD_FINDINGS, INDEX_FINDINGS, LINK_FINDINGS, ORPHAN_FINDINGS,
         BUNDLE_FINDINGS, FINDINGS_WALK)


@dataclass(frozen=True, slots=True)
class WalkStep:
    """One file of a validation's walk: its findings before staleness, the concept whose
    staleness is checked there (``None``: it cannot be stale at any ``as_of``), then the rest."""

    before: Findings
    stale: concepts.StaleDate | None
    after: Findings


# Only the files that have a finding or may be stale: a clean bundle's walk is nearly empty.
Walk = tuple[WalkStep, ...]


def _tupled(
    produce: Callable[_P, Iterable[_T]], *args: _P.args, **kwargs: _P.kwargs
) -> Callable[[], tuple[_T, ...]]:
    """A factory for ``Memo.get``: ``tuple(produce(*args, **kwargs))``, arguments bound now."""
    return lambda: tuple(produce(*args, **kwargs))


@dataclass(frozen=True, slots=True)
class ValidateOptions:
    reference: Reference
    strict: bool = False
    check_links: bool = False
    check_orphans: bool = False
    target_version: str = "auto"


def validate(snapshot: Snapshot, options: ValidateOptions, token: CancelToken) -> dict[str, Any]:
    version = resolve_version(snapshot, options.target_version)
    findings = list(findings_for(snapshot, options, VersionRules.of(version), token))
    findings.sort(key=Diagnostic.sort_key)
    errors = sum(1 for d in findings if d.severity == ERROR)
    return {
        "version": version,
        "version_declaration": version_declaration(snapshot),
        "temporal_profile": options.reference.profile,
        "as_of": options.reference.as_of,
        "scanned_files": len(snapshot.documents),
        "conformance": {"conformant": errors == 0, "errors": errors},
        "guidance": {
            "warnings": sum(1 for d in findings if d.severity == WARN),
            "info": sum(1 for d in findings if d.severity == INFO),
        },
        "diagnostics": [d.validation_json() for d in findings],
    }


# The findings that say a concept file declares no type (OKF §11): no frontmatter, or none in it.
TYPELESS_CODES = frozenset({"missing_frontmatter", "missing_type"})


@dataclass(frozen=True, slots=True)
class TypeCoverage:
    """How many of a bundle's concept files (every Markdown file but index.md and log.md)
    declare no type."""

    typeless: int
    concepts: int

    @property
    def mostly_typeless(self) -> bool:
        """More than half of the concept files have no type: the folder is most likely not an
        OKF bundle at all (a documentation folder), which one sentence says better than one
        identical finding per file."""
        return self.typeless * 2 > self.concepts > 0


def type_coverage(snapshot: Snapshot, report: dict[str, Any]) -> TypeCoverage:
    """The files of ``report`` (validate's answer for ``snapshot``) that have no type."""
    typeless = {d["file"] for d in report["diagnostics"] if d["code"] in TYPELESS_CODES}
    concepts = sum(1 for doc in snapshot.documents.values() if doc.concept_id is not None)
    return TypeCoverage(len(typeless), concepts)


def findings_for(
    snapshot: Snapshot, options: ValidateOptions, rules: VersionRules, token: CancelToken
) -> Iterator[Diagnostic]:
    """Every finding. Rules that read one document are memoised on that document (it is reused
    across snapshots while its bytes stay the same); rules over the whole bundle are memoised on
    the snapshot, and so is the walk over every file that gathers them (:data:`FINDINGS_WALK`).
    Only staleness, which depends on ``as_of``, is computed on every call, for the concepts
    that may be stale."""
    yield from snapshot.skipped
    walk: Walk = of_snapshot(
        snapshot,
        FINDINGS_WALK,
        lambda: _kept_walk(snapshot, options.strict, rules, options.check_links, token),
        (options.strict, rules, options.check_links),
        token.check,
    )
    for step in walk:
        yield from step.before
        if step.stale is not None:
            yield from concepts.staleness(step.stale, options.reference)
        yield from step.after
    token.check()
    if options.check_orphans:
        yield from orphan_findings(snapshot)
    yield from of_snapshot(snapshot, BUNDLE_FINDINGS, lambda: _kept_findings(
        snapshot, "bundle", lambda: tuple(_bundle_findings(snapshot))))


def _read_findings(kept: Any) -> Findings | None:
    try:
        return None if kept is None else _decode_findings(kept)
    except (TypeError, ValueError):
        return None  # a damaged row: made again


def _kept_findings(snapshot: Snapshot, what: str, build: Callable[[], Findings]) -> Findings:
    """``build()``, or what an earlier process on the same files kept of it
    (``model.revision_value``)."""
    return revision_value(snapshot, unrevised_name(snapshot, f"findings/1/{what}", []),
                          _read_findings, build, _encode_findings)


def _kept_walk(
    snapshot: Snapshot, strict: bool, rules: VersionRules, check_links: bool, token: CancelToken
) -> Walk:
    """:func:`_walk`, or the walk an earlier process on the same files kept (a restart: the
    walk of 10,000 clean files found nothing in 2.3 s of the warm-up, decoding every file's
    facts to follow its links). With the links, each document's link findings are kept too
    and put back in their own places, so that the edit after a restart takes the unchanged
    documents' from them (:func:`_earlier_link_findings`) as it does after a warm-up."""
    documents = snapshot.documents
    made_links: dict[str, Findings] = {}

    def read(kept: Any) -> Walk | None:
        if not (isinstance(kept, list) and len(kept) == 2 and isinstance(kept[0], list)
                and isinstance(kept[1], dict)):
            return None
        try:
            steps = tuple(WalkStep(_decode_findings(before), _stale_date(stale),
                                   _decode_findings(after)) for before, stale, after in kept[0])
            found = {path: _decode_findings(rows) for path, rows in kept[1].items()}
        except (TypeError, ValueError):
            return None
        if not (check_links or not found) or not found.keys() <= documents.keys():
            return None
        if check_links:
            for path in documents:
                keep_of_snapshot(snapshot, LINK_FINDINGS, found.get(path, ()), path)
        return steps

    def _stale_date(kept: Any) -> concepts.StaleDate | None:
        if kept is None:
            return None
        if not (isinstance(kept, list) and len(kept) == 3):
            raise ValueError("a stale date of another shape")
        path, value, line = kept
        # Checked without building the document: building it is what keeping the date spares.
        if not (isinstance(path, str) and concept_id_for_path(path) in snapshot.concepts):
            raise ValueError("a stale concept not in the snapshot")
        if not (isinstance(value, str) and (line is None or type(line) is int)):
            raise ValueError("a stale date of another shape")
        return concepts.StaleDate(path, value, line)

    def build() -> Walk:
        walk = _walk(snapshot, strict, rules, check_links, token)
        if check_links:
            for path in documents:
                found = kept(snapshot, LINK_FINDINGS, path)
                if found:
                    made_links[path] = found
        return walk

    def encode(walk: Walk) -> list[Any]:
        return [[[_encode_findings(step.before), _encode_stale(step.stale),
                  _encode_findings(step.after)] for step in walk],
                {path: _encode_findings(found) for path, found in made_links.items()}]

    name = unrevised_name(snapshot, "findings/2/walk",
                          [strict, rules.effective, rules.chosen, check_links])
    return revision_value(snapshot, name, read, build, encode)


ANCHORS_KEPT = 4096  # link targets whose anchors one validation walk keeps at a time


def _walk(
    snapshot: Snapshot, strict: bool, rules: VersionRules, check_links: bool, token: CancelToken
) -> Walk:
    """Every file's findings in walk order, staleness left to each call (it depends on
    ``as_of``). Walking 10,000 files' kept findings cost a call ~100 ms; it is done once per
    snapshot and variant instead."""
    steps: list[WalkStep] = []
    # Link targets come back (every page of a folder links its index), and a target's anchors
    # are read from its facts, decoded on each read: the last ones read are kept for this walk.
    @functools.lru_cache(maxsize=ANCHORS_KEPT)
    def anchors_at(path: str) -> Collection[str]:
        return links.target_anchors(snapshot.documents[path])

    def anchors(target: Document) -> Collection[str]:
        return anchors_at(target.path)

    earlier_links = _earlier_link_findings(snapshot) if check_links else None
    for doc in snapshot.documents.values():
        token.check()
        before = of_document(
            doc,
            DOCUMENT_FINDINGS,
            _tupled(_document_findings, doc, strict, rules),
            (strict, rules),
        )
        after: list[Diagnostic] = []
        stale: concepts.StaleDate | None = None
        if doc.concept_id is not None:
            stale = concepts.stale_date(doc)
            found: Findings = of_snapshot(
                snapshot,
                FIELD_FINDINGS,
                _tupled(_field_findings, snapshot, doc, check_links),
                (doc.path, check_links),
            )
            after.extend(found)
        if strict and doc.kind == "index" and doc.parse_error is None:
            found = of_snapshot(
                snapshot,
                INDEX_FINDINGS,
                _tupled(reserved.index_description_mismatches, doc, snapshot),
                doc.path,
            )
            after.extend(found)
        if check_links:
            found = of_snapshot(
                snapshot, LINK_FINDINGS,
                _earlier_or_made(earlier_links, doc, _tupled(
                    links.link_findings, doc, snapshot, anchors)),
                doc.path,
            )
            after.extend(found)
        if before or stale is not None or after:
            steps.append(WalkStep(before, stale, tuple(after)))
    return tuple(steps)


def _earlier_or_made(
    earlier: Callable[[Document], Findings | None] | None, doc: Document,
    make: Callable[[], Findings],
) -> Callable[[], Findings]:
    def build() -> Findings:
        found = earlier(doc) if earlier is not None else None
        return make() if found is None else found
    return build


def _earlier_link_findings(snapshot: Snapshot) -> Callable[[Document], Findings | None] | None:
    """The predecessor's link findings of a document, where they cannot differ; ``None`` when
    no document's can be taken.

    A document's link findings depend on its links, on which paths, folders and concept IDs
    exist, and on the anchors of the documents its links reach. After an edit of concepts'
    files that adds, moves or removes nothing, only the edited documents' and those of
    documents that may link to an edited one (their anchors may have changed) can differ:
    every other document's are taken from the predecessor, so an edit's follow-up warm-up
    does not decode every document's facts again. Anything else (a file created or deleted,
    an ``index.md`` edited, a file that stops parsing) makes every document's anew."""
    earlier = snapshot.predecessor()
    if earlier is None:
        return None
    if (snapshot.assets != earlier.assets or snapshot.directories != earlier.directories
            or snapshot.documents.keys() != earlier.documents.keys()
            or snapshot.concepts.keys() != earlier.concepts.keys()):
        return None
    changed = snapshot.documents.differing(earlier.documents)
    edited: set[str] = set()
    for path in changed:
        now, before = snapshot.documents[path], earlier.documents[path]
        if now.concept_id is None or now.concept_id != before.concept_id or (
                now.concept_id not in snapshot.concepts
                or snapshot.concepts[now.concept_id] is not now):
            return None  # not the same concept's file edited: every document's are made
        edited.add(now.concept_id)
    changed_paths = frozenset(changed)

    def earlier_findings(doc: Document) -> Findings | None:
        if doc.path in changed_paths:
            return None
        found = kept(earlier, LINK_FINDINGS, doc.path)
        if found is None or (edited and doc.rules.may_link_to(doc, edited)):
            return None
        return found

    return earlier_findings


def orphan_findings(snapshot: Snapshot) -> tuple[Diagnostic, ...]:
    """The findings of the orphan check (``orphan`` WARN per concept its folder's ``index.md``
    does not link, ``missing_index`` INFO per folder without one), built once per snapshot."""
    return of_snapshot(snapshot, ORPHAN_FINDINGS, lambda: _kept_findings(
        snapshot, "orphans", lambda: tuple(links.orphan_findings(snapshot))))


def _document_findings(doc: Document, strict: bool, rules: VersionRules
                       ) -> Iterator[Diagnostic]:
    if doc.concept_id is None:
        yield from reserved.reserved_conformance(doc, rules)
        return
    yield from concepts.conformance(doc)
    yield from concepts.guidance(doc)
    if strict:
        yield from concepts.strict(doc, rules)


def _field_findings(snapshot: Snapshot, doc: Document, check_links: bool
                    ) -> Iterator[Diagnostic]:
    """Rules that read one concept and the files it names: path-valued fields (§6.2) and the
    Attested Computation contract (§10), whatever the effective version."""
    yield from fields.field_path_findings(snapshot, doc, check_links)
    yield from computations.computation_findings(snapshot, doc)


def _bundle_findings(snapshot: Snapshot) -> Iterator[Diagnostic]:
    yield from bundle.collisions(snapshot)
    yield from bundle.unresolved_relations(snapshot)
    yield from bundle.mixed_temporal_kinds(snapshot)
