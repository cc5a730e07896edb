"""MCP resources over the served bundles: the ``okf://`` URIs, the paged listing, reads, changes.

Transport-free (no SDK import), like :mod:`bundle_mcp.dispatch`: ``server``/``surfaces`` adapt it.

A concept is ``okf://<bundle>/<concept-id>``, with the *whole* ID percent-encoded as one path
segment (every byte outside RFC 3986 "unreserved" as ``%XX``, upper-case hex, ``/`` too):
``tables/orders`` → ``okf://shop/tables%2Forders``. That is exactly what RFC 6570 simple
expansion of the template ``okf://shop/{concept_id}`` gives, so a client that expands the
template itself reaches the same URI, and the mapping is one-to-one: a URI names at most one ID
and every ID has one URI. ``index.md`` and ``log.md`` files are ``okf://<bundle>/<path>``
(``okf://shop/tables%2Findex.md``); a concept ID never ends in ``.md``, so the two never meet.
``<bundle>`` is a lower-case name made from the folder's name (see :func:`serve_bundles`).
See docs/decisions/wire.md, "Resources, prompts, completions, logging and progress".
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import posixpath
import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import quote

from .derived import Slot, of_snapshot
from .errors import BundleMcpError
from .model import CONCEPT, INDEX, LOG, Snapshot, canonical_json
from .okf.ids import concept_id_for_path, concept_id_problem, path_for_concept_id

__all__ = [
    "DEFAULT_PAGE_SIZE",
    "RESOURCE_ENTRIES",
    "SLOTS",
    "MIME_TYPE",
    "SCHEME",
    "Catalog",
    "Changes",
    "CursorError",
    "Page",
    "ResourceEntry",
    "ResourceTarget",
    "ServedBundle",
    "UriError",
    "changes_between",
    "concept_uri",
    "entries_of",
    "file_uri",
    "find_entry",
    "parse_uri",
    "resource_state",
    "serve_bundles",
    "template_uri",
]

RESOURCE_ENTRIES: Slot[tuple[ResourceEntry, ...]] = Slot(
    "resource_entries", "snapshot", "the okf:// resources of the snapshot, per bundle label",
)
SLOTS = (RESOURCE_ENTRIES,)

SCHEME = "okf"
MIME_TYPE = "text/markdown"
DEFAULT_PAGE_SIZE = 500
MAX_DESCRIPTION_CHARS = 1000
# A 4096-byte path, every byte encoded as %XX, plus the scheme and a bundle name.
MAX_URI_LENGTH = 3 * 4096 + 128
_MAX_CURSOR_LENGTH = 512
_MAC_BYTES = 16
_PREFIX = f"{SCHEME}://"
_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")
_SLUG_CHARS = re.compile(r"[^a-z0-9]+")
_MAX_SLUG = 48


class UriError(BundleMcpError, ValueError):
    """A URI that names no resource of this server; the message says why (no host path)."""


class CursorError(BundleMcpError, ValueError):
    """A ``resources/list`` cursor this server did not issue, or issued for another listing."""


@dataclass(frozen=True, slots=True)
class ServedBundle:
    """A bundle of the allow-list under the name its URIs use."""

    label: str
    path: str


@dataclass(frozen=True, slots=True)
class ResourceTarget:
    """What a parsed URI names: a concept (by ID) or a reserved file (by path) of one bundle."""

    label: str
    concept_id: str | None
    path: str  # the document's bundle-relative file path


@dataclass(frozen=True, slots=True)
class ResourceEntry:
    """One listed resource: a parseable concept, or an ``index.md``/``log.md`` file."""

    uri: str
    name: str  # the concept ID, or the file path of a reserved file
    title: str | None
    description: str | None
    size: int  # bytes of the file
    path: str
    sha256: str


@dataclass(frozen=True, slots=True)
class Page:
    entries: tuple[ResourceEntry, ...]
    next_cursor: str | None


@dataclass(frozen=True, slots=True)
class Changes:
    """What differs between two captures of one bundle, in URI terms."""

    updated: frozenset[str]  # resources whose bytes changed, or that went away
    list_changed: bool  # a resource appeared or went away


# --------------------------------------------------------------------------------------------
# Names and URIs


def serve_bundles(paths: Sequence[str]) -> tuple[ServedBundle, ...]:
    """The allow-list under URI names, sorted by name.

    The name is the folder's name in lower case, reduced to ``a-z``, ``0-9`` and ``-`` (it is a
    URI authority, which clients may lower-case or IDNA-encode); a name that several bundles
    share gets ``-`` and 8 hex digits of the SHA-256 of each bundle's path, so the name does not
    depend on the order of the command line and never shows the path.
    """
    slugs = {path: _slug(path) for path in dict.fromkeys(paths)}
    counts: dict[str, int] = {}
    for slug in slugs.values():
        counts[slug] = counts.get(slug, 0) + 1
    served: dict[str, ServedBundle] = {}
    for path, slug in slugs.items():
        label = slug
        if counts[slug] > 1:
            digest = hashlib.sha256(path.encode("utf-8", "surrogateescape")).hexdigest()
            label = f"{slug}-{digest[:8]}"
            if label in served:  # two paths whose digests share 8 digits: take all of them
                label = f"{slug}-{digest}"
        served[label] = ServedBundle(label, path)
    return tuple(served[label] for label in sorted(served))


def _slug(path: str) -> str:
    name = posixpath.basename(path.rstrip("/"))
    ascii_name = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode("ascii")
    slug = _SLUG_CHARS.sub("-", ascii_name.lower()).strip("-")
    return slug[:_MAX_SLUG].strip("-") or "bundle"


def _encode(text: str) -> str:
    # quote() keeps exactly RFC 3986 "unreserved" (A-Z a-z 0-9 - . _ ~) with safe="", and
    # writes upper-case hex: the same bytes as RFC 6570 simple string expansion.
    return quote(text, safe="", encoding="utf-8", errors="strict")


def concept_uri(label: str, concept_id: str) -> str:
    return f"{_PREFIX}{label}/{_encode(concept_id)}"


def file_uri(label: str, path: str) -> str:
    """The URI of a reserved file (``index.md`` / ``log.md``) by its bundle-relative path."""
    return f"{_PREFIX}{label}/{_encode(path)}"


def template_uri(label: str) -> str:
    """The RFC 6570 template whose simple expansion is :func:`concept_uri`."""
    return f"{_PREFIX}{label}/{{concept_id}}"


def parse_uri(uri: str) -> ResourceTarget:
    """The concept or reserved file ``uri`` names. The bundle name is not looked up here.

    Only the canonical form is accepted: a URI is compared as a string by clients (and in
    subscriptions), so every resource has exactly one. The scheme and the bundle name are
    case-insensitive, as RFC 3986 makes them; the rest is exact.

    Raises:
        UriError: not an ``okf://`` URI, a query or fragment, a raw ``/`` inside the ID, a bad
            or non-canonical percent-encoding, or an ID or path no concept or reserved file can
            have (``..`` segments, control characters, …).
    """
    if len(uri) > MAX_URI_LENGTH:
        raise UriError(f"the URI is longer than {MAX_URI_LENGTH} characters")
    if uri[: len(_PREFIX)].lower() != _PREFIX:
        raise UriError(f"not a URI of this server: its resources are {_PREFIX}<bundle>/<id>")
    rest = uri[len(_PREFIX) :]
    label, slash, encoded = rest.partition("/")
    label = label.lower()
    if not slash or not encoded:
        raise UriError(f"the URI names no concept: {_PREFIX}<bundle>/<percent-encoded id>")
    if "?" in encoded or "#" in encoded:
        raise UriError("a concept URI has no query or fragment: '?' is %3F and '#' is %23")
    if "/" in encoded:
        raise UriError(
            "the whole concept ID is one percent-encoded path segment: '/' is %2F "
            "(complete the template's concept_id, or take the URI from resources/list)"
        )
    if _PERCENT.search(encoded):
        raise UriError("a '%' that does not start a %XX escape")
    try:
        name = bytes(_unquote_bytes(encoded)).decode("utf-8")
    except UnicodeDecodeError:
        raise UriError("the percent-encoded bytes are not UTF-8") from None
    canonical = _encode(name)
    if canonical != encoded:
        raise UriError(
            "not the canonical form of this URI (escape every byte outside A-Z a-z 0-9 - . _ ~, "
            f"with upper-case hex, and nothing else): {_PREFIX}{label}/{canonical}"
        )
    if name.endswith(".md"):
        if posixpath.basename(name) not in ("index.md", "log.md"):
            raise UriError("only index.md and log.md files are resources besides concepts")
        problem = concept_id_problem(concept_id_for_path(name), allow_reserved_names=True)
        if problem is not None:
            raise UriError(f"not a file path of a bundle ({problem})")
        return ResourceTarget(label, None, name)
    problem = concept_id_problem(name)
    if problem is not None:
        raise UriError(f"not a concept ID: {problem}")
    return ResourceTarget(label, name, path_for_concept_id(name))


def _unquote_bytes(encoded: str) -> bytearray:
    out = bytearray()
    i = 0
    while i < len(encoded):
        char = encoded[i]
        if char == "%":
            out.append(int(encoded[i + 1 : i + 3], 16))
            i += 3
        else:
            out += char.encode("utf-8")
            i += 1
    return out


# --------------------------------------------------------------------------------------------
# Entries of one snapshot


def entries_of(label: str, snapshot: Snapshot) -> tuple[ResourceEntry, ...]:
    """The resources of one capture, in bundle-path order (memoised with the snapshot)."""
    return of_snapshot(snapshot, RESOURCE_ENTRIES, lambda: _entries(label, snapshot), label)


def _entries(label: str, snapshot: Snapshot) -> tuple[ResourceEntry, ...]:
    out: list[ResourceEntry] = []
    for path in sorted(snapshot.documents):
        doc = snapshot.documents[path]
        if doc.parse_error is not None:
            continue  # never listed, as the tools never list it (validate_bundle reports it)
        if doc.kind == CONCEPT:
            if doc.concept_id is None or doc.concept_id not in snapshot.concepts:
                continue
            # fm_value: two keys of every concept, without freezing every frontmatter.
            title = doc.fm_value("title")
            out.append(
                ResourceEntry(
                    uri=concept_uri(label, doc.concept_id),
                    name=doc.concept_id,
                    title=title if isinstance(title, str) else None,
                    description=_description(doc.fm_value("description")),
                    size=doc.record.size,
                    path=path,
                    sha256=doc.record.sha256,
                )
            )
        elif doc.kind in (INDEX, LOG):
            folder = posixpath.dirname(path)
            what = "Index" if doc.kind == INDEX else "Log"
            out.append(
                ResourceEntry(
                    uri=file_uri(label, path),
                    name=path,
                    title=f"{what} of {folder}" if folder else what,
                    description=None,
                    size=doc.record.size,
                    path=path,
                    sha256=doc.record.sha256,
                )
            )
    return tuple(out)


def _description(value: object) -> str | None:
    if not isinstance(value, str):
        return None
    if len(value) <= MAX_DESCRIPTION_CHARS:
        return value
    return value[: MAX_DESCRIPTION_CHARS - 1] + "…"


def find_entry(target: ResourceTarget, snapshot: Snapshot) -> tuple[ResourceEntry, str] | None:
    """The entry and the raw text (the whole file as decoded) of what ``target`` names."""
    doc = snapshot.documents.get(target.path)
    if doc is None or doc.parse_error is not None:
        return None
    if target.concept_id is not None:
        if snapshot.concepts.get(target.concept_id) is not doc:
            return None
    elif doc.kind not in (INDEX, LOG):
        return None
    for entry in entries_of(target.label, snapshot):
        if entry.path == target.path:
            return entry, doc.text
    return None  # pragma: no cover - every servable document has an entry


def resource_state(entries: Sequence[ResourceEntry]) -> Mapping[str, str]:
    """URI → SHA-256 of the bytes: what a change poll compares."""
    return {entry.uri: entry.sha256 for entry in entries}


def changes_between(old: Mapping[str, str], new: Mapping[str, str]) -> Changes:
    changed = {uri for uri, digest in new.items() if uri in old and old[uri] != digest}
    gone = set(old) - set(new)
    return Changes(
        updated=frozenset(changed | gone), list_changed=bool(gone) or bool(set(new) - set(old))
    )


# --------------------------------------------------------------------------------------------
# The listing and its cursor


@dataclass(frozen=True, slots=True)
class Catalog:
    """The served bundles and the listing rules of one server.

    ``cursor_key`` authenticates cursors: a cursor is the listing's revision and an offset,
    with a MAC under a key made when the server starts, so a forged or damaged cursor is told
    apart from a stale one.
    """

    bundles: tuple[ServedBundle, ...]
    page_size: int
    cursor_key: bytes

    def __post_init__(self) -> None:
        if self.page_size < 1:
            raise ValueError("page_size must be at least 1")

    def bundle(self, label: str) -> ServedBundle | None:
        for served in self.bundles:
            if served.label == label:
                return served
        return None

    def page(self, captures: Sequence[tuple[ServedBundle, Snapshot]], cursor: str | None) -> Page:
        """One page of every served bundle's resources (bundles by name, then by path).

        Raises:
            CursorError: the cursor was not issued here, or the listing changed since.
        """
        revision = _listing_revision(captures)
        entries = [e for served, snap in captures for e in entries_of(served.label, snap)]
        start = 0 if cursor is None else self._offset(cursor, revision, len(entries))
        end = start + self.page_size
        next_cursor = self._cursor(revision, end) if end < len(entries) else None
        return Page(tuple(entries[start:end]), next_cursor)

    def _cursor(self, revision: str, offset: int) -> str:
        payload = canonical_json({"o": offset, "r": revision}).encode("utf-8")
        mac = hmac.new(self.cursor_key, payload, hashlib.sha256).digest()[:_MAC_BYTES]
        return base64.urlsafe_b64encode(mac + payload).decode("ascii").rstrip("=")

    def _offset(self, cursor: str, revision: str, total: int) -> int:
        forged = CursorError(
            "the cursor was not issued by this server (or was altered); list again without one"
        )
        if len(cursor) > _MAX_CURSOR_LENGTH or not cursor.isascii():
            raise forged
        try:
            raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        except (binascii.Error, ValueError):
            raise forged from None
        mac, payload = raw[:_MAC_BYTES], raw[_MAC_BYTES:]
        expected = hmac.new(self.cursor_key, payload, hashlib.sha256).digest()[:_MAC_BYTES]
        if not hmac.compare_digest(mac, expected):
            raise forged
        value = json.loads(payload)  # ours: the MAC matched
        if value["r"] != revision:
            raise CursorError(
                "the resource list changed since this cursor was issued (a bundle was edited); "
                "list again without a cursor"
            )
        offset = value["o"]
        if not isinstance(offset, int) or not 0 < offset < total:  # pragma: no cover - ours
            raise forged
        return offset


def _listing_revision(captures: Sequence[tuple[ServedBundle, Snapshot]]) -> str:
    # The snapshot revision covers every Markdown file's bytes, which decide the entries.
    pairs = [[served.label, snapshot.revision] for served, snapshot in captures]
    # 128 bits tell listings apart; the cursor stays short.
    return hashlib.sha256(canonical_json(pairs).encode("utf-8")).hexdigest()[:32]
