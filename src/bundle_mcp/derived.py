"""The snapshot index: how a structure derived from a snapshot or a document is kept, and the
register of every such structure.

A :class:`~bundle_mcp.model.Snapshot` and its :class:`~bundle_mcp.model.Document` objects are
frozen, so anything computed from them can be kept with them and reused: it changes speed, never
an answer. Each kind of kept structure is a typed :class:`Slot`, declared by the module that
builds it, in that module (``okf/graph.py`` declares ``GRAPH: Slot[BundleGraph]``); code asks
for one with :func:`of_snapshot` or :func:`of_document`, which build it on first use and return
the stored value afterwards. Nothing outside this module (and the model's own frozen
frontmatter) reads or writes the memo a frozen object carries.

"What does a snapshot know?" is :func:`slots`: every slot of every module in :data:`OWNERS`, a
fixed tuple of module names, each of which lists its own slots in a module-level ``SLOTS``
tuple. The register is that immutable tuple of names, not a list owners append to at import:
the house rules allow no module-level mutable state, and a register filled by side effects would
answer differently depending on what happened to be imported. The owners sit above this module
(the graph, validation, the tools, the dispatcher, the surfaces), so it cannot import them; it
names them, and :func:`slots` imports them by name when asked (they are already imported in a
server). Only introspection asks: :func:`built`, the warm-up (which builds each slot's
``warm`` in this order) and the tests, never a call's own path. A test checks that every slot
defined anywhere in the package is registered exactly once.

Document-level slots live with the document, which the loader reuses across snapshots while its
bytes stay the same: an edit to one file rebuilds only that file's structures and the
snapshot-level ones. A document slot with a :class:`Codec` outlives the process too: the parse
cache keeps its values by the document's bytes, and a document read back from the cache reads
them back (:func:`of_document`) instead of building them.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import json
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar, cast

from ._version import __version__
from .cancel import CancelToken
from .model import Concepts, Document, Snapshot, outside_revision

__all__ = [
    "OWNERS", "Codec", "Slot", "Warm", "built", "exactly", "kept", "kept_values", "of_concept",
    "of_document", "of_snapshot", "release", "slots", "stored_key",
]

T = TypeVar("T")

# How the warm-up builds a slot ahead of the first call: every value of it that a call with
# default arguments would build for this snapshot (its view, for a reader). Runs in the warm-up
# thread; ``token`` is the warm-up's, checked as the slot's own builders check a call's.
Warm = Callable[[Snapshot, CancelToken], object]


@dataclass(frozen=True)
class Codec(Generic[T]):
    """How a document slot's value is kept in the parse cache, so that a restarted server reads
    it back instead of building it again (the value is a pure function of the document's bytes
    and the variant, and the cache's rows are keyed by those bytes).

    ``encode`` gives JSON-native data; ``decode`` turns it back into a value equal to the one a
    build gives, raising ``KeyError``, ``TypeError``, ``ValueError`` or ``IndexError`` for data
    that does not fit (then the value is built). ``version`` names the encoding: change it with
    the value's shape, and rows of the old shape are never read.
    """

    version: int
    encode: Callable[[T], Any]
    decode: Callable[[Any], T]


@dataclass(frozen=True, eq=False)
class Slot(Generic[T]):
    """One kind of derived structure. ``eq=False``: a slot is its own identity (the memo key).

    ``warm`` is how the warm-up builds it (``None``: it is built only by the calls that need it,
    for example per query term, or on the first miss). ``carried``: its builder starts from the
    value of the snapshot's predecessor (:func:`kept`), so a replaced snapshot keeps that value
    until its successor has built its own (:func:`release`). ``early``: over a parse cache's
    rows the warm-up builds it before the documents (``readiness.warm_steps``): what the tool
    the server's instructions send an agent to first needs, which a restarted server reads
    back without a document. ``after_save``: the warm-up builds it after its parse cache save,
    on the whole capture (``readiness.saved_steps``): what writes into the database the save
    makes on a cold start.
    """

    name: str
    owner: Literal["snapshot", "document"]
    what: str
    warm: Warm | None = None
    codec: Codec[T] | None = None  # a document slot kept in the parse cache (Codec)
    carried: bool = False
    early: bool = False
    after_save: bool = False


# The modules that declare slots, each in a module-level ``SLOTS`` tuple, in the order the
# warm-up builds them: what most first calls need comes ready first, and a slot comes after the
# slots its builder reads (bundle_summary's counts read the orphan findings and the graph).
OWNERS: tuple[str, ...] = (
    "bundle_mcp.loader.views",
    "bundle_mcp.okf.suggest",
    "bundle_mcp.validation.links",
    "bundle_mcp.validation.reserved",
    "bundle_mcp.tools.list_concepts",
    "bundle_mcp.tools.search_concepts",
    "bundle_mcp.tools._section_index",
    "bundle_mcp.tools._context_index",
    "bundle_mcp.validation",
    "bundle_mcp.tools.get_semantic_graph",
    "bundle_mcp.okf.graph",
    "bundle_mcp.tools.bundle_summary",
    # After the structures first calls wait for: search_concepts scans until this is built.
    "bundle_mcp.tools._body_words",
    "bundle_mcp.completion",
    "bundle_mcp.resources",
    "bundle_mcp.dispatch",
)


def slots() -> tuple[Slot[Any], ...]:
    """Every registered slot: each owner's ``SLOTS``, in :data:`OWNERS` order."""
    found: list[Slot[Any]] = []
    for name in OWNERS:
        found.extend(importlib.import_module(name).SLOTS)
    return tuple(found)


def of_snapshot(
    snapshot: Snapshot,
    slot: Slot[T],
    build: Callable[[], T],
    variant: Hashable = None,
    check: Callable[[], None] | None = None,
) -> T:
    """The snapshot's structure ``slot`` (for ``variant``: a profile, a file, a label), built by
    ``build`` on first use. ``build`` must be a pure function of the snapshot and the variant.

    When another thread is building it (the background warm-up, say), this waits for that build;
    ``check`` (a call's ``CancelToken.check``) runs meanwhile, so a cancelled call stops waiting.
    """
    if slot.owner != "snapshot":
        raise ValueError(f"{slot.name} is kept per document")
    return snapshot.memo.get((slot, variant), build, check)


def built_value(snapshot: Snapshot, slot: Slot[T], variant: Hashable = None) -> T | None:
    """The snapshot's structure ``slot`` for ``variant`` when it is built, else ``None``; builds
    nothing. A quicker way to a value that a larger one already holds."""
    if slot.owner != "snapshot":
        raise ValueError(f"{slot.name} is kept per document")
    found, value = snapshot.memo.peek((slot, variant))
    return cast(T, value) if found else None


def kept(snapshot: Snapshot, slot: Slot[T], variant: Hashable = None) -> T | None:
    """The snapshot's structure ``slot`` for ``variant`` when it is built, else ``None``; builds
    nothing. For a builder that can update an earlier snapshot's value instead of building
    its own (:attr:`~bundle_mcp.model.Snapshot.predecessor`): only a ``carried`` slot's, the
    values :func:`release` leaves to a successor."""
    if slot.owner == "snapshot" and not slot.carried:
        raise ValueError(f"{slot.name} is not carried: a replaced snapshot lets it go first")
    return built_value(snapshot, slot, variant)


def kept_earlier(snapshot: Snapshot, slot: Slot[T]) -> tuple[Snapshot, T] | None:
    """The nearest earlier capture (:meth:`~bundle_mcp.model.Snapshot.earlier`) that still
    holds its ``slot`` (:func:`kept`), with that value; ``None`` when none does. Usually the
    predecessor; changes in quick succession leave captures no warm-up reached, or that
    nothing holds, and one further back is then updated over every file that differs since
    (any two captures: the differing cells are what changed)."""
    for before in snapshot.earlier():
        value = kept(before, slot)
        if value is not None:
            return before, value
    return None


def release(snapshot: Snapshot, *, carried: bool) -> None:
    """Empty the memo of a snapshot that was replaced (the warm-up's, before it builds the
    successor's slots): otherwise both sets are held at once until the replaced one is
    collected, and its structures hold reference cycles that only a full collection frees.

    ``carried=False`` keeps the values of the ``carried`` slots, which the successor's builders
    read (:func:`kept`); ``True``, once the successor has built its own, lets those go too.
    The documents' memos are left alone: the successor shares every unchanged document. A
    value asked for again is built again (a call still running on the replaced snapshot gets
    the same answer, later).
    """
    snapshot.memo.drop(
        lambda key: not carried and isinstance(key, tuple) and len(key) == 2
        and isinstance(key[0], Slot) and key[0].carried
    )
    snapshot.release_edges()


def document_holds(doc: Document, slot: Slot[Any], variant: Hashable = None) -> bool:
    """Whether the document's structure ``slot`` for ``variant`` is built (or read back);
    builds nothing."""
    found, _ = doc.memo.peek((slot, variant))
    return found


def of_document(
    doc: Document,
    slot: Slot[T],
    build: Callable[[], T],
    variant: Hashable = None,
    check: Callable[[], None] | None = None,
) -> T:
    """The document's structure ``slot`` for ``variant``, built by ``build`` on first use;
    ``build`` must be a pure function of the document and the variant; ``check`` as in
    :func:`of_snapshot`."""
    if slot.owner != "document":
        raise ValueError(f"{slot.name} is kept per snapshot")
    codec, stored = slot.codec, doc.stored
    if codec is None or stored is None:
        return doc.memo.get((slot, variant), build, check)

    def read_or_build() -> T:
        key = stored_key(slot, variant)
        raw = stored(key) if key is not None else None
        if raw is not None:
            try:
                return codec.decode(raw)
            except (KeyError, TypeError, ValueError, IndexError):
                pass  # a row that does not fit this encoding: build it
        return build()

    return doc.memo.get((slot, variant), read_or_build, check)


def of_concept(
    snapshot: Snapshot, concept_id: str, slot: Slot[T], build: Callable[[Document], T]
) -> T:
    """:func:`of_document` of the snapshot's concept, without building its document when that
    is not built yet and an earlier process kept the slot's value for the file's bytes (the
    parse cache's rows, :attr:`~bundle_mcp.model.Snapshot.inbound`): that value is read,
    decoded and kept by the file's cell, and the document takes it when it is built. A
    restarted server's first question reads the words of the thousand concepts it ranks
    without building a thousand documents, and its second reads them once more from memory.
    ``KeyError`` for an ID that is no concept."""
    store, codec, concepts = snapshot.inbound, slot.codec, snapshot.concepts
    # A snapshot built from documents (tests, a remote copy) has plain mappings: no cells.
    path = concepts.paths.get(concept_id) if isinstance(concepts, Concepts) else None
    if path is not None and store is not None and codec is not None:
        cell = snapshot.documents.cells[path]
        if cell.peek() is None and concept_id in concepts:
            memo_key = (slot, None)
            found, value = cell.early(memo_key)
            if found:
                return cast(T, value)
            key = stored_key(slot, None)
            raw = store.derived(path, cell.record.sha256, key) if key is not None else None
            if raw is not None:
                try:
                    return cell.keep_early(memo_key, codec.decode(raw))
                except (KeyError, TypeError, ValueError, IndexError):
                    pass  # a row that does not fit this encoding: the document builds it
    doc = snapshot.concepts[concept_id]
    return of_document(doc, slot, lambda: build(doc))


def keep_of_snapshot(snapshot: Snapshot, slot: Slot[T], value: T, variant: Hashable = None
                     ) -> T:
    """Keep ``value`` as the snapshot's structure ``slot`` for ``variant``, made by a larger
    value's builder (read back with it); the value kept (one built before wins)."""
    if slot.owner != "snapshot":
        raise ValueError(f"{slot.name} is kept per document")
    return snapshot.memo.put((slot, variant), value)


def keep_of_concept(snapshot: Snapshot, concept_id: str, slot: Slot[T], value: T,
                    variant: Hashable = None) -> T:
    """Keep ``value`` as the snapshot's concept's value of the document slot ``slot`` (for
    ``variant``), made without its document (read back with every other concept's at once):
    kept by the file's cell, and by the document when it is built. The value kept (one kept
    before wins, so every reader shares one). A snapshot without cells keeps nothing and
    returns ``value``."""
    concepts = snapshot.concepts
    path = concepts.paths.get(concept_id) if isinstance(concepts, Concepts) else None
    if path is None:
        return value
    return snapshot.documents.cells[path].keep_early((slot, variant), value)


def kept_of_concept(snapshot: Snapshot, concept_id: str, slot: Slot[T],
                    variant: Hashable = None) -> tuple[bool, Any]:
    """``(True, value)`` when the concept's value of the document slot ``slot`` for
    ``variant`` is kept, by its document or (:func:`keep_of_concept`) by its file's cell, else
    ``(False, None)``. Builds nothing, the document included."""
    concepts = snapshot.concepts
    path = concepts.paths.get(concept_id) if isinstance(concepts, Concepts) else None
    if path is None:
        doc = concepts.get(concept_id)
        return (False, None) if doc is None else doc.memo.peek((slot, variant))
    return snapshot.documents.cells[path].early((slot, variant))


def exactly(kind: type[T], value: Any) -> T:
    """``value`` when its type is exactly ``kind``, else ``TypeError``: what a codec's decoder
    checks each kept field with (JSON's ``true`` is no int, ``1`` is no float here)."""
    if type(value) is not kind:
        raise TypeError(f"expected {kind.__name__}, not {type(value).__name__}")
    return value


def stored_key(slot: Slot[Any], variant: Hashable) -> str | None:
    """The key of a document slot's value in the parse cache: its name, its codec's version and
    the variant as JSON; ``None`` when it is not kept (no codec, a variant JSON cannot spell)."""
    if slot.codec is None:
        return None
    if variant is None:  # most slots: json.dumps(None) at each document's read was 7 µs
        return f"{slot.name}/{slot.codec.version}/null"
    try:
        spelled = json.dumps(variant, separators=(",", ":"), sort_keys=True, allow_nan=False,
                             default=_spelled)
    except (TypeError, ValueError):
        return None
    return f"{slot.name}/{slot.codec.version}/{spelled}"


def _spelled(value: Any) -> Any:
    """A frozen dataclass in a variant, as its class name and fields (json.dumps ``default``)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [type(value).__name__, dataclasses.asdict(value)]
    raise TypeError(f"{type(value).__name__} is not kept")


def kept_values(
    doc: Document, wanted: Callable[[str], bool] = lambda key: True
) -> Iterator[tuple[str, Any]]:
    """``(key, encoded value)`` of every built value of ``doc``'s slots that have a codec, among
    the keys ``wanted`` accepts (only those are encoded): what a save of the parse cache keeps
    for the next process."""
    for key in doc.memo.keys():
        if not (isinstance(key, tuple) and len(key) == 2 and isinstance(key[0], Slot)):
            continue
        slot, variant = key
        name = stored_key(slot, variant)
        if name is None or slot.codec is None or not wanted(name):
            continue
        found, value = doc.memo.peek(key)
        if found:
            yield name, slot.codec.encode(value)


def built(snapshot: Snapshot) -> dict[str, int]:
    """How many values of each slot are built for this snapshot (documents' slots summed)."""
    counts = {slot.name: 0 for slot in slots()}
    owners: list[Any] = [snapshot.memo, *(doc.memo for doc in snapshot.documents.built())]
    for memo in owners:
        for key in memo.keys():
            if isinstance(key, tuple) and key and isinstance(key[0], Slot):
                counts[key[0].name] += 1
    return counts


def unrevised_name(snapshot: Snapshot, kind: str, variant: Any) -> str:
    """The name a whole-bundle value is kept under beside the revision
    (:func:`~bundle_mcp.model.revision_value`) when it may depend on what the revision does
    not cover (a link may reach an asset or a folder; a folder may lack its index): ``kind``,
    then a digest of ``variant`` (JSON data), the release and
    :func:`~bundle_mcp.model.outside_revision`."""
    decided_by = json.dumps([__version__, variant, *outside_revision(snapshot)],
                            ensure_ascii=True, separators=(",", ":"))
    return f"{kind}/" + hashlib.sha256(decided_by.encode("ascii")).hexdigest()[:32]
