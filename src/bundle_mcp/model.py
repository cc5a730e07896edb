"""Frozen value objects: what one captured bundle contains.

A :class:`Document` depends only on its path and its bytes, so a changed file is re-parsed alone
and every other document is reused as is. A :class:`Snapshot` is the set of documents of one
capture plus indexes derived from them; nothing mutates either after it is built. Derived data
(the Markdown parse, search folds, the link graph) is computed on first use and memoised: it is a
pure function of the frozen fields, so memoising it changes no observable value.

The value objects own no format rule: whoever builds a :class:`Document` hands it the
:class:`FormatRules` its derived data is computed by (the loader's are
``bundle_mcp.loader.document.OKF_RULES``), so this module imports no parser and depends only on
:mod:`bundle_mcp.errors`, :mod:`bundle_mcp.frozen_map` (the frozen mappings) and the standard
library.
"""

from __future__ import annotations

import abc
import bisect
import contextvars
import functools
import hashlib
import itertools
import json
import operator
import sys
import threading
import types
import weakref
from array import array
from collections.abc import (
    Callable,
    Collection,
    ItemsView,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
    ValuesView,
)
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol, TypeVar, cast

from .errors import Diagnostic
from .frozen_map import frozen_mapping
from .packed_text import HeldText

CONCEPT = "concept"
INDEX = "index"
LOG = "log"
RESERVED_NAMES = {"index.md": INDEX, "log.md": LOG}


def freeze(value: Any) -> Any:
    """Deep-freeze JSON-native data: dicts become read-only mappings, lists become tuples.

    Keys and the short strings a bundle repeats are interned (:func:`shared_text`): every document
    spells the same keys, and its types, tags, dates and references recur across the bundle.
    An interned string equals the one it replaces, so no value changes. A mapping's keys are
    held once for every mapping with the same keys (:func:`~bundle_mcp.frozen_map.frozen_mapping`).
    """
    kind = type(value)
    if kind is dict:
        return frozen_mapping(value, _frozen_item)
    if kind is list or kind is tuple:
        return tuple([_frozen_item(v) for v in value])
    if isinstance(value, dict):
        return frozen_mapping(value, freeze)
    if isinstance(value, (list, tuple)):
        return tuple(freeze(v) for v in value)
    return _frozen_item(value)


def _frozen_item(value: Any) -> Any:
    kind = type(value)
    if kind is str:
        return shared_text(value)
    if kind in _CONTAINERS:
        return freeze(value)
    return value


_CONTAINERS = (dict, list, tuple)

# The longest string :func:`shared_text` interns. Identifier-like values (a type, a tag, a date, a
# concept reference, an author) repeat across a bundle; prose (a title, a description) and
# long URLs seldom do, and an interned string that never repeats costs its entry in the
# interpreter's table (about 40 bytes) for nothing.
_SHARED_MAX = 64


def shared_text(text: str) -> str:
    """``text``, interned when it looks like an identifier (short, no space): one object for
    every copy of it in the bundle's frozen data."""
    return sys.intern(text) if len(text) <= _SHARED_MAX and " " not in text else text


def thaw(value: Any) -> Any:
    """The JSON-native copy of frozen data, safe to hand to a serializer or a caller."""
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [thaw(v) for v in value]
    return value


def canonical_json(value: Any) -> str:
    """Sorted keys, no whitespace, UTF-8 text: the form every hash in the project is taken over."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


_T = TypeVar("_T")


# How often a call waiting for another thread's build looks at its own cancellation.
BUILD_WAIT_POLL_SECONDS = 0.05


class _Build:
    """A value one thread is computing; the others wait for ``done`` instead of computing too
    (``waiters`` of them, counted under the memo's lock)."""

    __slots__ = ("thread", "done", "waiters")

    def __init__(self) -> None:
        self.thread = threading.get_ident()
        self.done = threading.Event()
        self.waiters = 0


# The builds the running thread has under way (Memo._build), innermost last: per thread, as a
# context variable is (each thread starts with none).
_UNDER_WAY: contextvars.ContextVar[tuple[_Build, ...]] = contextvars.ContextVar(
    "memo_builds_under_way", default=())


def awaited() -> bool:
    """Whether another thread waits for a value this thread is building: a background builder
    that steps aside while calls run (the warm-up, ``readiness``) must not, then, or the call
    would wait for it."""
    return any(build.waiters for build in _UNDER_WAY.get())


class Memo:
    """Derived data kept with a frozen object: ``get(key, factory)`` computes once, then reuses.

    Only pure functions of the owner's frozen fields may be stored here, so a memoised value is
    the value any later call would compute: memoising changes speed, never an answer. The
    factory runs outside the lock (it may be slow and may consult other memos). While one
    thread computes a key, another thread asking for it waits for that build rather than
    computing it a second time (both would share the interpreter lock, so a second build only
    slows the first); the waiter calls ``check`` every few milliseconds, so its own cancellation
    still ends the wait. When the build fails (the builder was cancelled, or the value cannot be
    built), a waiter builds it itself and meets the same outcome the builder met.

    ``max_values`` bounds what is kept: past it, the value stored first is dropped (and is
    built again if asked for later).
    """

    __slots__ = ("_values", "_building", "_lock", "_max_values")

    def __init__(self, max_values: int | None = None) -> None:
        self._max_values = max_values
        self._values: dict[Any, Any] = {}
        self._building: dict[Any, _Build] = {}
        self._lock = threading.Lock()

    def keys(self) -> tuple[Any, ...]:
        """The keys stored so far (a copy: other threads may be adding)."""
        with self._lock:
            return tuple(self._values)

    def put(self, key: Any, value: _T) -> _T:
        """Store ``value`` under ``key`` unless a value is stored already; the stored one."""
        with self._lock:
            return cast(_T, self._values.setdefault(key, value))

    def peek(self, key: Any) -> tuple[bool, Any]:
        """``(True, value)`` when ``key`` is stored, ``(False, None)`` otherwise; builds nothing."""
        with self._lock:
            if key in self._values:
                return True, self._values[key]
            return False, None

    def drop(self, keep: Callable[[Any], bool]) -> None:
        """Forget every stored value whose key ``keep`` refuses (a build under way is left to
        finish). The values are let go one at a time, outside the lock: freeing a large
        structure holds the interpreter lock, and another thread may run between two."""
        with self._lock:
            dropped = [self._values.pop(key) for key in list(self._values) if not keep(key)]
        while dropped:
            dropped.pop()

    def get(
        self, key: Any, factory: Callable[[], _T], check: Callable[[], None] | None = None
    ) -> _T:
        # cast: each key is only ever stored with one factory (the callers' contract above), so
        # the stored value has that factory's type.
        while True:
            try:
                return cast(_T, self._values[key])
            except KeyError:
                pass
            with self._lock:
                if key in self._values:
                    return cast(_T, self._values[key])
                build = self._building.get(key)
                mine = build is None
                if build is None:
                    build = self._building[key] = _Build()
            if mine:
                return self._build(key, factory, build)
            if build.thread == threading.get_ident():
                raise RuntimeError(f"{key!r} is needed by its own factory")
            with self._lock:
                build.waiters += 1
            try:
                while not build.done.wait(BUILD_WAIT_POLL_SECONDS):
                    if check is not None:
                        check()
            finally:
                with self._lock:
                    build.waiters -= 1

    def _build(self, key: Any, factory: Callable[[], _T], build: _Build) -> _T:
        under_way = _UNDER_WAY.set((*_UNDER_WAY.get(), build))
        try:
            value = factory()
            with self._lock:
                kept = self._values.setdefault(key, value)
                if self._max_values is not None and len(self._values) > self._max_values:
                    del self._values[next(iter(self._values))]
                return cast(_T, kept)
        finally:
            _UNDER_WAY.reset(under_way)
            with self._lock:
                del self._building[key]
                if not self._building:
                    # A fresh empty dict holds no table; the emptied one kept its own (about
                    # 160 bytes a document, every document's memo having built something).
                    self._building = {}
            build.done.set()


@dataclass(frozen=True, slots=True)
class FileRecord:
    """What the revision is computed from: the captured bytes of one document."""

    path: str
    size: int
    sha256: str
    # This record as the revision's JSON spells it (:func:`revision_of`), written once: every
    # capture after a change hashes every record again, and spelling 10,000 of them anew was
    # most of that (~8 ms at the file cap, on every call that follows an edit).
    spelled: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        encode = json.encoder.encode_basestring  # the C encoder canonical_json uses for a str
        object.__setattr__(
            self, "spelled",
            f'{{"path":{encode(self.path)},"sha256":{encode(self.sha256)},"size":{self.size}}}')


@dataclass(frozen=True, slots=True)
class Link:
    """One parser-owned Markdown link that may point inside the bundle.

    ``target`` is the normalised bundle-relative path the destination names (``""`` is the root
    directory), or ``None`` when it climbs above the root. ``concept_id`` is the concept the link
    would reach (``.md`` stripped), ``None`` for directory links and escapes.
    """

    raw: str
    line: int
    target: str | None
    concept_id: str | None
    fragment: str | None
    is_directory: bool


@dataclass(frozen=True, slots=True)
class Relation:
    """One typed relation edge from the frontmatter ``relations`` extension.

    ``source`` and ``target`` are escaped reference strings (``hash\\#name#frag``); ``target_id``
    is the unescaped concept part of the target, which decides whether the relation resolves.
    """

    source: str
    relation_type: str
    target: str
    target_id: str
    fragment: str | None


@dataclass(frozen=True, slots=True)
class Section:
    """A non-overlapping span of a document: the preamble, or one heading and what follows it."""

    index: int
    heading: str | None
    level: int
    anchor: str | None
    line_start: int
    line_end: int
    breadcrumb: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class FootnoteRef:
    label: str
    line: int


@dataclass(frozen=True, slots=True)
class FootnoteDef:
    label: str
    line: int
    text: str


@dataclass(frozen=True, slots=True)
class MarkdownFacts:
    """What the Markdown parser owns: links, sections, heading anchors, footnotes."""

    links: tuple[Link, ...]
    sections: tuple[Section, ...]
    anchors: Collection[str]  # the sections' anchors, as :func:`anchors_of` gives them
    footnote_refs: tuple[FootnoteRef, ...]
    footnote_defs: tuple[FootnoteDef, ...]


# Up to this many anchors a document keeps them as a tuple, searched in turn; past it, a
# frozenset. Every document keeps its anchors for its life, and a frozenset of a handful was
# about 700 bytes against 100 for the tuple; a long document still answers in constant time.
_ANCHORS_AS_TUPLE = 16


def anchors_of(sections: Sequence[Section]) -> Collection[str]:
    """The heading anchors of ``sections`` (``in`` is all a caller asks of them): distinct,
    since a document's slugs are (``okf.markdown.SlugCounter``)."""
    return anchors_from([s.anchor for s in sections if s.anchor is not None])


def anchors_from(anchors: list[str]) -> Collection[str]:
    """:func:`anchors_of`, given the sections' anchors in order."""
    return tuple(anchors) if len(anchors) <= _ANCHORS_AS_TUPLE else frozenset(anchors)


class Unfrozen:
    """JSON-native frontmatter read from the parse cache, frozen on first use (see
    ``Document.frontmatter``).

    Once frozen, the JSON-native copy is let go: only the frozen mapping is kept, and
    :meth:`get` reads it (keeping both was about 2 MiB per thousand documents after the
    warm-up, which freezes every concept's). The value it stands for never changes, so this
    is a memo, not a mutation. Two threads freezing at once each freeze (equal mappings);
    the first one kept is the one every later call gets.
    """

    __slots__ = ("_data", "_frozen")

    def __init__(self, data: dict[str, Any]) -> None:
        self._data: dict[str, Any] | None = data
        self._frozen: Mapping[str, Any] | None = None

    def frozen(self) -> Mapping[str, Any]:
        """The frozen mapping, frozen now if no call has yet."""
        frozen = self._frozen
        if frozen is not None:
            return frozen
        data = self._data
        if data is not None:
            # cast: freeze turns a dict into a read-only mapping with the same (str) keys.
            made = cast(Mapping[str, Any], freeze(data))
            if self._frozen is None:
                self._frozen = made
        # Set before the data is dropped (here or by the thread that froze meanwhile), so a
        # reader that finds no data finds the mapping.
        self._data = None
        kept = self._frozen
        assert kept is not None
        return kept

    def adopt(self, frozen: Mapping[str, Any]) -> None:
        """Hold ``frozen``, the mapping :meth:`frozen` would make of this data (frozen from
        the same row before this document was built: ``Concepts.fields_of``), unless one is
        held already; the JSON-native copy is let go as :meth:`frozen` lets it go."""
        if self._frozen is None:
            self._frozen = frozen
        self._data = None

    def get(self, key: str, default: Any = None) -> Any:
        """``frozen().get(key, default)``, without freezing the rest of the mapping while it
        is not."""
        frozen = self._frozen
        if frozen is None:
            data = self._data
            if data is not None:
                item = data.get(key, default)
                return freeze(item) if type(item) in _CONTAINERS else item
            frozen = self._frozen  # frozen meanwhile: set before the data was dropped
            assert frozen is not None
        return frozen.get(key, default)

    def fields(self) -> Mapping[str, Any]:
        """:attr:`Document.fields` of a document holding this frontmatter."""
        return self.frozen() if self.is_frozen() else _Fields(self)

    def names(self) -> tuple[str, ...]:
        """The keys, in order, without freezing."""
        data = self._data
        if data is not None:
            return tuple(data)
        frozen = self._frozen  # frozen meanwhile: set before the data was dropped
        assert frozen is not None
        return tuple(frozen)

    def is_frozen(self) -> bool:
        return self._frozen is not None

    def __eq__(self, other: object) -> bool:
        # Equal to another holder of the same frontmatter, frozen or not (as the dataclass
        # this replaces compared its data); never to a mapping.
        if not isinstance(other, Unfrozen):
            return NotImplemented
        return self is other or self._plain() == other._plain()

    __hash__ = None  # type: ignore[assignment]  # unhashable, as the dict it holds

    def __repr__(self) -> str:
        return f"Unfrozen({self._plain()!r})"

    def _plain(self) -> Any:
        """The JSON-native data, thawed from the mapping once that is all that is kept."""
        data = self._data
        if data is not None:
            return data
        return thaw(self._frozen)


class _Fields(Mapping[str, Any]):
    """:attr:`Document.fields` of a frontmatter the parse cache gave and nothing froze yet:
    each value is frozen as it is read (the one :meth:`Unfrozen.frozen` would hold, equal to
    it), and the rest of the mapping is not."""

    __slots__ = ("_held",)

    def __init__(self, held: Unfrozen) -> None:
        self._held = held

    def __getitem__(self, key: str) -> Any:
        found = self._held.get(key, _ABSENT)
        if found is _ABSENT:
            raise KeyError(key)
        return found

    def __iter__(self) -> Iterator[str]:
        return iter(self._held.names())

    def __len__(self) -> int:
        return len(self._held.names())


_ABSENT: Any = object()


@dataclass(frozen=True, slots=True)
class FoldedFields:
    """A concept's searchable fields after :func:`bundle_mcp.okf.folding.fold`.

    The body's fold is kept only when the body is not ASCII (``kept_body``): an ASCII body
    folds to its lowercase, as long as the body and about as quick to make again as to scan
    (a kept copy of every body was 55 MiB at 9,978 concepts), while a non-ASCII body's fold
    (decomposition, case folding, composition) costs 10 to 25 times that and its offsets differ
    from the text's. :meth:`Document.folded_body` and :meth:`Document.folded_body_holds` give
    the fold either way.
    """

    concept_id: str
    title: str
    description: str
    tags: tuple[str, ...]
    kept_body: str | None  # the body's fold when the body is not ASCII; None: it is ASCII


class Lines(Sequence[str]):
    """The physical lines of a text (without terminators), as ``Document.lines`` gives them."""

    __slots__ = ()

    @abc.abstractmethod
    def bounds(self, first: int, last: int) -> tuple[int, int]:
        """The text offsets where line ``first`` starts and line ``last - 1`` ends (before its
        terminator); ``first < last`` and both within the lines."""

    def span(self, first: int, last: int) -> str:
        """``"\\n".join(self[first:last])``; an implementation may cut it out in one piece."""
        return "\n".join(self[first:last])


@dataclass(frozen=True, slots=True)
class FormatRules:
    """The format's rules a document's derived data is computed by, handed in by its builder.

    Each must be a pure function of the document's frozen fields (or of the text it is given),
    so memoising its result on the document changes no answer.
    """

    # Links, sections, anchors, footnotes; the loader gives each document a callable of its
    # own that keeps what it computed (as packed text: ``loader.facts_codec.PackedFacts``).
    markdown: Callable[[Document], MarkdownFacts]
    fold: Callable[[str], str]  # caseless matching, for the fields search compares
    lines: Callable[[str], Lines]  # the physical lines every line number counts
    # ``markdown``'s sections alone, without making its links (a walk needs no more); and how
    # many there are, known without decoding once the facts have been made (walks ask it of
    # every concept they pass: ``Document.sliced``).
    sections: Callable[[Document], tuple[Section, ...]]
    anchors: Callable[[Document], Collection[str]]  # ``markdown.anchors``, no section made
    section_count: Callable[[Document], int]
    # The sections' (start, end) line numbers, flat, no section made once they are known (a
    # walk names the sections of every concept it passes by these, and renders few).
    section_spans: Callable[[Document], tuple[int, ...]]
    # Whether a link of the document may name one of these concept IDs: False is sure, True
    # may not be. A new concept asks every document; most say no without decoding their facts.
    may_link_to: Callable[[Document, Collection[str]], bool]


@dataclass(frozen=True)
class Document:
    """One captured ``.md`` file: a concept or a reserved ``index.md`` / ``log.md``.

    ``text`` is the whole decoded file (the raw file for ``read_concept``), made on each read
    from what the document holds (``held``, :mod:`bundle_mcp.packed_text`: the file read back,
    or a compressed copy): read it once per use, not once per line. ``body`` is the text after
    the frontmatter block and starts on physical line ``body_line`` (1-based). A document that
    could not be parsed keeps ``parse_error`` and empty parsed fields.
    """

    path: str
    kind: str
    concept_id: str | None
    record: FileRecord
    held: HeldText
    # Where the frontmatter block's YAML lies in ``text`` (start, end), None without one: the
    # YAML is cut from the text when asked for (:attr:`frontmatter_raw`), not kept beside it.
    frontmatter_span: tuple[int, int] | None
    # The frozen frontmatter, None without one, or Unfrozen data read from the parse cache,
    # frozen on first use (freezing every file up front was most of a cached start).
    frontmatter_value: Mapping[str, Any] | Unfrozen | None
    body_start: int
    body_line: int
    line_count: int
    # What the derived properties below are computed by; always given by the builder.
    rules: FormatRules = field(repr=False, compare=False)
    parse_error: Diagnostic | None = None
    relations: tuple[Relation, ...] = ()
    relation_diagnostics: tuple[Diagnostic, ...] = ()
    memo: Memo = field(default_factory=Memo, repr=False, compare=False)
    # What an earlier process kept of this document's derived structures, by key (the parse
    # cache's ``derived`` rows for these bytes); ``None`` when nothing was kept. Read only by
    # ``derived.of_document``, which still builds whatever this cannot give.
    stored: Callable[[str], Any] | None = field(default=None, repr=False, compare=False)

    @property
    def text(self) -> str:
        """The whole decoded file, made now (read back from its file, or decompressed)."""
        return self.held.text()

    @property
    def frontmatter_raw(self) -> str | None:
        """The frontmatter block's YAML as written, None without one."""
        span = self.frontmatter_span
        return None if span is None else self.text[span[0]:span[1]]

    @property
    def frontmatter(self) -> Mapping[str, Any] | None:
        value = self.frontmatter_value
        if isinstance(value, Unfrozen):
            return value.frozen()
        return value

    def fm_value(self, key: str) -> Any:
        """``fm.get(key)``, without freezing the whole frontmatter when it came from the parse
        cache: a look at one key of every document (its ``type``, say) would otherwise freeze
        every document's mapping, about 1 s at the file cap. The value equals ``fm.get(key)``."""
        value = self.frontmatter_value
        if isinstance(value, Unfrozen):
            return value.get(key)
        return self.fm.get(key)

    @property
    def fields(self) -> Mapping[str, Any]:
        """:attr:`fm` for reading a few keys: equal to it key by key, but a frontmatter the
        parse cache gave is not frozen whole for them (a card or a name of each of a thousand
        documents read back froze every field of each, most of a restarted server's first
        walk or neighbour list)."""
        value = self.frontmatter_value
        if isinstance(value, Unfrozen):
            return value.fields()
        return self.fm

    @property
    def is_concept(self) -> bool:
        return self.kind == CONCEPT

    @property
    def fm(self) -> Mapping[str, Any]:
        """The frontmatter mapping, empty when there is none."""
        return self.frontmatter if self.frontmatter is not None else _EMPTY

    @property
    def markdown(self) -> MarkdownFacts:
        """The Markdown facts, made now from what the rules keep: the body is parsed on first
        use (listing or reading a concept needs no Markdown parse), then its facts are kept as
        compressed text and decoded on each read (``loader.facts_codec``). Read them once per
        use, not once per link."""
        return self.rules.markdown(self)

    @property
    def sections(self) -> tuple[Section, ...]:
        """``markdown.sections``, made without the rest of the facts."""
        return self.rules.sections(self)

    @property
    def anchors(self) -> Collection[str]:
        """``markdown.anchors``, made without the sections (a link's fragment is checked
        against them)."""
        return self.rules.anchors(self)

    @property
    def section_count(self) -> int:
        """``len(markdown.sections)``, without decoding the facts again once they were made
        (``FormatRules.section_count``)."""
        return self.rules.section_count(self)

    @property
    def section_spans(self) -> tuple[int, ...]:
        """Each section's ``line_start`` and ``line_end``, flat, in section order
        (``FormatRules.section_spans``)."""
        return self.rules.section_spans(self)

    @property
    def sliced(self) -> bool:
        """Whether the concept was cut into sections (two or more)."""
        return self.section_count > 1

    @functools.cached_property
    def folded(self) -> FoldedFields:
        """The fields search_concepts matches, folded once per document and kept (the body's
        fold only when the body is not ASCII: :class:`FoldedFields`)."""
        fold = self.rules.fold
        fm = self.fm
        tags = fm.get("tags")
        return FoldedFields(
            concept_id=fold(self.concept_id or ""),
            title=fold(fm["title"]) if isinstance(fm.get("title"), str) else "",
            description=(
                fold(fm["description"]) if isinstance(fm.get("description"), str) else ""
            ),
            tags=tuple(fold(t) for t in tags if isinstance(t, str))
            if isinstance(tags, tuple)
            else (),
            kept_body=self.kept_folded_body,
        )

    @property
    def kept_folded_body(self) -> str | None:
        """``folded.kept_body``: the fold of a body that is not ASCII, kept (``None`` for an
        ASCII body, whose fold has the text's offsets). Made without folding the other
        fields, which a restarted server's warm-up no longer needs (it sorts every concept's
        body by kind for search_concepts' scan). Nothing is stored on the document of an
        ASCII text: a value kept there for each grew every document's attribute table."""
        # An ASCII text has an ASCII body: only the others' bodies are decompressed and cut
        # out to be asked.
        return None if self.held.ascii else self._body_fold

    @functools.cached_property
    def _body_fold(self) -> str | None:
        body = self.body
        return None if body.isascii() else self.rules.fold(body)

    def folded_body(self) -> str:
        """The body folded: the kept fold of a non-ASCII body, else folded now and not kept
        (the caller lets it go when done)."""
        kept = self.kept_folded_body
        return kept if kept is not None else self.rules.fold(self.body)

    def folded_body_holds(self, needle: str) -> bool:
        """Whether the folded body contains ``needle`` (``needle in self.folded_body()``)."""
        kept = self.kept_folded_body
        if kept is not None:
            return needle in kept
        text, fold = self.text, self.rules.fold
        if text.isascii():
            # A needle that is its own fold, found in the text as written, is in its fold too.
            if fold(needle) == needle and text.find(needle, self.body_start) >= 0:
                return True
            # ASCII text folds to text of the same length: the body's fold is the text's from
            # ``body_start`` on, found there without cutting the body out first.
            return fold(text).find(needle, self.body_start) >= 0
        return needle in fold(text[self.body_start:])

    @property
    def lines(self) -> Lines:
        """Physical lines of the file without their terminators (CRLF, CR and LF end a line).

        Made on each read, over the text decompressed for it: kept, they would keep the text
        whole beside its compressed form. Take them once per use."""
        return self.rules.lines(self.text)

    @property
    def body(self) -> str:
        """The text after the frontmatter block (cut from ``text`` when asked for, not kept)."""
        return self.text[self.body_start:]


_EMPTY: Mapping[str, Any] = types.MappingProxyType({})


def revision_of(records: list[FileRecord] | tuple[FileRecord, ...]) -> str:
    """SHA-256 over the canonical JSON of the sorted file records (docs/DESIGN.md §2), as hex.

    The JSON is written piece by piece instead of through ``canonical_json``: at the file cap
    this runs on every reload, and the pieces (each record's :attr:`FileRecord.spelled`) are
    exactly what ``canonical_json`` would emit for
    ``[{"path": ..., "sha256": ..., "size": ...}, ...]`` (a test checks the two agree).
    """
    ordered = records if _sorted_by_path(records) else sorted(records, key=_path_of)
    return revision_of_sorted(ordered)


def revision_of_sorted(ordered: Sequence[FileRecord]) -> str:
    """:func:`revision_of` of records already sorted by path."""
    pieces = ",".join([r.spelled for r in ordered])
    return hashlib.sha256(f"[{pieces}]".encode()).hexdigest()


def _path_of(record: FileRecord) -> str:
    return record.path


def records_by_path(
    cells: Mapping[str, Deferred], earlier: Documents | None = None,
    changed: Sequence[str] | None = None,
) -> tuple[FileRecord, ...]:
    """The records of ``cells`` sorted by path, for the revision: ``earlier``'s sorted records
    patched with the paths whose cell differs (``changed``, when the capturer knows them: a
    refresh), else sorted whole. Sorting (or checking the order of) 50,000 records cost about
    13 ms on every capture after a change; the documents keep the result for the next one."""
    before = earlier.sorted_records if earlier is not None else None
    if before is not None and changed is not None:
        ordered = list(before)
        for path in changed:
            at = bisect.bisect_left(ordered, path, key=_path_of)
            if at < len(ordered) and ordered[at].path == path:
                del ordered[at]
            cell = cells.get(path)
            if cell is not None:
                ordered.insert(at, cell.record)
        return tuple(ordered)
    records = tuple(cell.record for cell in cells.values())
    return records if _sorted_by_path(records) else tuple(sorted(records, key=_path_of))


def _sorted_by_path(records: list[FileRecord] | tuple[FileRecord, ...]) -> bool:
    return all(a.path <= b.path for a, b in zip(records, records[1:], strict=False))


# The one edge model. Every edge between two concepts is an :class:`Edge`: this module derives
# the links and typed relations (:attr:`Snapshot.edges`); ``bundle_mcp.okf.graph`` derives the
# field edges (they need the format's path-field rules) as edges of kind :data:`FIELD`. Each edge
# goes by two wire names, both read off the same object: its ``kind`` (get_neighbors'
# ``navigation`` / ``relation``) and its ``relationship`` (the graph verbs' ``LINKS_TO``, the
# relation's declared type, the field edge's name).
NAVIGATION = "navigation"  # a resolved Markdown link
RELATION = "relation"  # a typed relation from the frontmatter ``relations`` extension
FIELD = "field"  # a path-valued frontmatter field naming a concept (OKF v0.2 §6.2)
LINKS_TO = "LINKS_TO"  # the relationship a link is reported under


class Edge(NamedTuple):
    """A resolved concept edge: a navigation link, a typed relation or a field edge.

    ``source_ref`` / ``target_ref`` are the escaped references with their fragments for a
    relation, the plain concept IDs otherwise. ``relationship`` is the edge's name as the graph
    verbs report and filter it: :data:`LINKS_TO` for a link, the declared type for a relation,
    the field edge's name (``SOURCED_FROM``…) for a field edge.

    A named tuple, not a frozen dataclass: a restarted server reads a bundle's edges back
    (130,000 at the bench size), and a tuple is made in a fifth of a frozen dataclass's time.
    """

    kind: str  # NAVIGATION | RELATION | FIELD
    source_id: str
    target_id: str
    source_ref: str
    target_ref: str
    relationship: str

    @property
    def relation_type(self) -> str | None:
        """The relation's declared type; ``None`` for a link (get_neighbors' wire field)."""
        return None if self.kind == NAVIGATION else self.relationship


@dataclass(frozen=True, slots=True)
class Attachment:
    """A non-Markdown file whose bytes the format needs (a file-mode Attested Computation).

    Read through the pinned root without following symlinks and under the per-file cap, like a
    Markdown file. ``data`` is ``None`` when it could not be read, and ``problem`` says why.
    """

    path: str
    record: FileRecord | None
    data: bytes | None
    problem: str | None = None


_NO_ATTACHMENTS: Mapping[str, Attachment] = types.MappingProxyType({})


# How a deferred document came to be: parsed from its bytes, or read back from the parse cache.
PARSED = "parsed"
DECODED = "decoded"
GIVEN = "given"  # built by the caller (the Python API, tests)
CHECKED = "checked"  # known to parse or not, not built yet


# The first step of building a deferred document: its parse error (None when it parses), and
# the step that builds it, saying how (PARSED or DECODED).
Check = tuple["Diagnostic | None", Callable[[], tuple["Document", str]]]


# At most this many concepts' edges made in one pass over the files' text
# (Snapshot.prefetch_edges): a level of a walk wider than that builds every edge, since most
# files then name one of its concepts.
MAX_PREFETCHED = 64


class TextBuild:
    """The build step of a checked file that will be parsed from its text: it can also tell,
    from that text, whether the file may link or relate to a concept (``okf.mentions``)
    before anything is parsed. :meth:`Deferred.named` asks it."""

    __slots__ = ()

    def __call__(self) -> tuple[Document, str]:
        raise NotImplementedError

    def named(self, concept_ids: tuple[str, ...]) -> tuple[str, ...]:
        """Those of ``concept_ids`` the file may link or relate to: a concept left out is one
        its text shows it names nowhere."""
        raise NotImplementedError

    def fields(self) -> Mapping[str, Any] | None:
        """The built document's :attr:`Document.fields`, from the frontmatter the check
        loaded, without building it; ``None`` when the build must tell."""
        raise NotImplementedError


class RowBuild:
    """The build step of a checked file whose document is read back from the parse cache's
    row for its bytes: it can also hold the file's text, without building the document, for a
    caller that knows the text's length (:meth:`Deferred.held_text`)."""

    __slots__ = ()

    def __call__(self) -> tuple[Document, str]:
        raise NotImplementedError

    def held_text(self, length: int) -> HeldText | None:
        """The ASCII text of ``length`` characters the document will hold, read back from its
        file when asked for; ``None`` when the document keeps its own (no file to read)."""
        raise NotImplementedError


# The key a file's cell keeps its concept's frozen frontmatter under before the document is
# built (Concepts.fields_of), which the document then holds as its own (Unfrozen.adopt).
FROZEN_FIELDS = "frozen fields"


class Deferred:
    """One captured document, built from its bytes on first use and kept.

    A snapshot's revision needs only each file's record (path, size, sha256); the document
    itself (frontmatter, relations, the Markdown facts) is built when a call first asks for
    it. So a one-concept call on a cold bundle parses that concept and what its answer names,
    not the bundle. Whether the file parses at all (every call asks it of every file, for the
    parse policy) is a first, cheaper step (``check``) whose work the build then reuses. Both
    are pure functions of the bytes, so building late changes no answer. A cell is shared by
    every snapshot that captured the same bytes (a reader's view, the next capture after an
    edit): what one built, the others reuse.
    """

    __slots__ = ("record", "_check", "_finish", "_error", "_document", "_how", "_lock", "_early")

    def __init__(
        self, record: FileRecord, check: Callable[[], Check] | None = None,
        document: Document | None = None,
    ) -> None:
        if (check is None) == (document is None):
            raise ValueError("a deferred document needs exactly one of check and document")
        self.record = record
        self._check = check
        self._finish: Callable[[], tuple[Document, str]] | None = None
        self._error: Diagnostic | None = None
        self._document = document
        self._how = GIVEN if document is not None else None
        self._lock = threading.Lock()  # one check and one build per cell, whoever asks
        # Values of the document's memo known before it is built (read back from the parse
        # cache: ``derived.of_concept``), which the document takes when it is built.
        self._early: dict[Any, Any] | None = None

    @classmethod
    def of(cls, document: Document) -> Deferred:
        return cls(document.record, document=document)

    def parse_error(self) -> Diagnostic | None:
        """Why the file does not parse (``None`` when it does), checking it if needed."""
        doc = self._document
        if doc is not None:
            return doc.parse_error
        if self._check is None and self._finish is not None:
            # Checked, not built: the error was set before the check was let go (under the
            # lock), so it is read without it; a pass over every concept asks this 10,000
            # times.
            return self._error
        with self._lock:
            if self._document is not None:
                return self._document.parse_error
            if self._check is not None:
                self._error, self._finish = self._check()
                self._check = None  # drops the captured bytes it closed over
                self._how = CHECKED
            return self._error

    def document(self) -> Document:
        doc = self._document
        if doc is not None:
            return doc
        self.parse_error()
        with self._lock:
            if self._document is None:
                finish = self._finish
                assert finish is not None
                self._document, self._how = finish()
                self._finish = None
                early, self._early = self._early, None
                for key, value in (early or {}).items():
                    if key == FROZEN_FIELDS:
                        # The document's own frontmatter, frozen before it was built: held
                        # once, by the document, not beside it in its memo.
                        held = self._document.frontmatter_value
                        if isinstance(held, Unfrozen):
                            held.adopt(value)
                        continue
                    self._document.memo.put(key, value)
            return self._document

    def early(self, key: Any) -> tuple[bool, Any]:
        """``(True, value)`` when the document's memo holds ``key`` (or will: a value kept
        before the document was built), else ``(False, None)``; builds nothing."""
        with self._lock:
            if self._document is not None:
                return self._document.memo.peek(key)
            if self._early is not None and key in self._early:
                return True, self._early[key]
            return False, None

    def keep_early(self, key: Any, value: _T) -> _T:
        """Keep a value of the document's memo, built or not (then the document takes it when
        built); the value kept under ``key`` (the first one kept wins). Only a pure function
        of the file's bytes may be kept, as in any memo."""
        with self._lock:
            if self._document is not None:
                return self._document.memo.put(key, value)
            early = self._early if self._early is not None else {}
            self._early = early
            return cast(_T, early.setdefault(key, value))

    def peek(self) -> Document | None:
        """The document if it is built, without building it."""
        return self._document

    def named(self, concept_ids: tuple[str, ...]) -> tuple[str, ...]:
        """Those of ``concept_ids`` this file may link or relate to: told from its text when it
        is to be parsed (:class:`TextBuild`, ``okf.mentions``); all of them when it is built
        (its facts then tell, cheaply) or to be read back from the parse cache's row; none
        when it is broken (no concept, so no edges). Checks the file first if need be, as a
        build would."""
        if self.parse_error() is not None:
            return ()
        build, doc = self._finish, self._document
        if doc is not None:
            # Built: its relations are known, and its links tell from a few bits once its
            # facts are made (else from its body's text): no parse for this.
            if doc.rules.may_link_to(doc, concept_ids):
                return concept_ids
            targets = {rel.target_id for rel in doc.relations}
            return tuple(c for c in concept_ids if c in targets)
        if not isinstance(build, TextBuild):
            return concept_ids
        return build.named(concept_ids)

    def fields(self) -> Mapping[str, Any] | None:
        """The document's :attr:`Document.fields` without building it when the check loaded
        its frontmatter (:meth:`TextBuild.fields`: a cold start reads a field of every
        concept, its path-valued fields, before the warm-up has built them); ``None`` when
        only the build can tell (a broken file, a parse cache row, a built document: ask it)."""
        if self._document is not None or self.parse_error() is not None:
            return None
        build = self._finish
        return build.fields() if isinstance(build, TextBuild) else None

    def held_text(self, length: int) -> HeldText | None:
        """The document's text, known to be ASCII and ``length`` characters long (an earlier
        process counted them for these bytes), without building the document when it is to be
        read back from the parse cache (:class:`RowBuild`): a restarted server's search over
        every body reads the files, not ten thousand rows. ``None`` when only the build can
        hold it (then build it and ask), or when the file does not parse."""
        doc = self._document
        if doc is not None:
            return doc.held
        if self.parse_error() is not None:
            return None
        build = self._finish
        return build.held_text(length) if isinstance(build, RowBuild) else None

    @property
    def how(self) -> str | None:
        """``None`` while untouched, :data:`CHECKED` once its parse error is known, then
        :data:`PARSED`, :data:`DECODED` or :data:`GIVEN` once built."""
        return self._how


class Documents(Mapping[str, Document]):
    """A snapshot's documents by path, in walk order, each built on first use (:class:`Deferred`).

    Membership, order, length and every file record are known without building anything;
    looking a document up builds that one document. Iterating the values builds them all.
    """

    __slots__ = ("_cells", "_changed", "_sorted_records", "__weakref__")

    def __init__(
        self, cells: Mapping[str, Deferred],
        changed: tuple[Documents, tuple[str, ...]] | None = None,
        sorted_records: tuple[FileRecord, ...] | None = None,
    ) -> None:
        """``changed``: another capture's documents and the paths whose cell differs from
        theirs, in the order :meth:`differing` gives them, when the capturer knows (a refresh
        of the files a folder watch named): asking again would scan every cell.
        ``sorted_records``: the records sorted by path (:func:`records_by_path`), which the
        revision was computed from, for the next capture to patch."""
        self._cells = types.MappingProxyType(dict(cells))
        # Weakly: the earlier documents are not kept alive for this.
        self._changed = (None if changed is None
                         else (weakref.ref(changed[0]), tuple(changed[1])))
        self._sorted_records = sorted_records

    @property
    def sorted_records(self) -> tuple[FileRecord, ...] | None:
        return self._sorted_records

    @classmethod
    def of(cls, documents: Mapping[str, Document]) -> Documents:
        """Documents already built (by the caller), in the mapping's order."""
        if isinstance(documents, Documents):
            return documents
        return cls({path: Deferred.of(doc) for path, doc in documents.items()})

    def __getitem__(self, path: str) -> Document:
        return self._cells[path].document()

    def __iter__(self) -> Iterator[str]:
        return iter(self._cells)

    def __len__(self) -> int:
        return len(self._cells)

    def __contains__(self, path: object) -> bool:
        return path in self._cells

    @property
    def cells(self) -> Mapping[str, Deferred]:
        """The cells themselves, to carry into another snapshot without building them."""
        return self._cells

    def record(self, path: str) -> FileRecord:
        return self._cells[path].record

    def records(self) -> tuple[FileRecord, ...]:
        return tuple(cell.record for cell in self._cells.values())

    def known_differing(self, other: Documents) -> tuple[str, ...] | None:
        """:meth:`differing` when the capture that made these documents said (a refresh of
        ``other``'s), else ``None``; scans nothing."""
        known = self._changed
        return known[1] if known is not None and known[0]() is other else None

    def differing(self, other: Documents) -> tuple[str, ...]:
        """The paths whose cell is not the very same in ``other``: held by only one of the two,
        or by both with different cells. Unchanged files keep their cell from one capture to the
        next, so after an edit this names the files that changed (and no more); nothing is
        built to tell."""
        known = self.known_differing(other)
        if known is not None:
            return known
        mine, theirs = self._cells, other._cells
        out = [path for path, cell in mine.items() if theirs.get(path) is not cell]
        out.extend(path for path in theirs if path not in mine)
        return tuple(out)

    def built(self) -> Iterator[Document]:
        """The documents built so far, in walk order (other threads may be building more)."""
        for cell in self._cells.values():
            doc = cell.peek()
            if doc is not None:
                yield doc

    def broken(self) -> tuple[Document, ...]:
        """The documents that do not parse, in walk order: every file is checked, only the
        broken ones are built."""
        return tuple(self[p] for p, cell in self._cells.items() if cell.parse_error() is not None)

    def work(self) -> dict[str, int]:
        """How many documents were only checked, parsed, read back from the parse cache,
        handed in built, or are untouched: the work counters tests assert on (no clock)."""
        counts = {CHECKED: 0, PARSED: 0, DECODED: 0, GIVEN: 0, "pending": 0}
        for cell in self._cells.values():
            counts[cell.how or "pending"] += 1
        return counts


# A pass over every concept (Concepts' iteration) reads the rows of the documents not built yet
# this many at a time (the rows of one group are held until their documents are built), when at
# least MIN_READ_AHEAD of a group are: a few are read one by one as quickly.
READ_AHEAD_GROUP = 500
MIN_READ_AHEAD = 16


class Concepts(Mapping[str, Document]):
    """The parseable concepts by ID, sorted by ID, over :class:`Documents`.

    ``paths`` names every file that would be a concept if it parses, by the ID its path gives.
    Looking one ID up builds that one document; iterating or counting builds them all (a broken
    file is no concept, and only its parse can tell).
    """

    __slots__ = ("_documents", "_paths", "_memo", "_rows")

    def __init__(self, documents: Documents, paths: Mapping[str, str],
                 rows: InboundHint | None = None) -> None:
        """``rows``: where the documents not built yet are read back from (the snapshot's
        ``inbound``), so that a pass over every concept reads their rows a group at a time."""
        self._documents = documents
        self._paths = paths
        self._memo = Memo()
        self._rows = rows

    def __getitem__(self, concept_id: str) -> Document:
        if concept_id not in self:
            raise KeyError(concept_id)
        return self._documents[self._paths[concept_id]]

    def __contains__(self, concept_id: object) -> bool:
        # A file at a concept's path is that concept exactly when it parses (a name that is no
        # concept ID is a parse error too): the check answers it without building the file.
        if not isinstance(concept_id, str) or concept_id not in self._paths:
            return False
        return self._documents.cells[self._paths[concept_id]].parse_error() is None

    def fields_of(self, concept_id: str) -> Mapping[str, Any]:
        """``self[concept_id].fields``; for a concept whose document is not built, read from
        its parse cache row without building it when the row has it (a restarted server's
        neighbour list or subgraph reads the cards of a hundred or a thousand concepts, and
        each document's file was read and hashed and its row decoded for them)."""
        if not self.is_built(concept_id) and concept_id in self:
            path = self._paths[concept_id]
            cell = self._documents.cells[path]
            known, frozen = cell.early(FROZEN_FIELDS)
            if known:
                return cast(Mapping[str, Any], frozen)
            rows = self._rows
            found = None if rows is None else rows.frontmatter(
                path, self._documents.record(path).sha256)
            if found is not None:
                # Frozen whole and kept by the cell: a restarted server builds no document
                # ahead, and a walk's next call reads the same cards again (the document,
                # when built, holds this mapping as its own).
                return cell.keep_early(FROZEN_FIELDS, found.frozen())
            # A cold start: the frontmatter the check loaded, as the build would hold it.
            loaded = self._documents.cells[path].fields()
            if loaded is not None:
                return loaded
        return self[concept_id].fields

    def held_text(self, concept_id: str, length: int) -> HeldText | None:
        """``self[concept_id].held`` for a concept whose text an earlier process found ASCII
        and ``length`` characters long, without building its document when its parse cache
        row is to be read (:meth:`Deferred.held_text`); ``None``: ask the document."""
        path = self._paths.get(concept_id)
        if path is None:
            return None
        return self._documents.cells[path].held_text(length)

    def hold_fields(self, concept_ids: Sequence[str], check: Callable[[], None]) -> None:
        """Freeze each of these concepts' frontmatter, their rows read in one query: a
        restarted server's warm-up freezes every concept's this way, without building its
        document (:meth:`fields_of`), so that a walk's first call finds the cards of its
        thousand pages frozen. A document already built (a call's, or one whose row was
        missing) freezes its own: frozen, it takes less memory than the JSON read back from
        its row (about 2 MB a thousand concepts)."""
        self.read_fields_ahead(concept_ids)
        for concept_id in concept_ids:
            check()
            self.fields_of(concept_id)
            if self.is_built(concept_id):
                self[concept_id].fm  # noqa: B018

    def read_fields_ahead(self, concept_ids: Iterable[str]) -> None:
        """Read the parse cache rows' frontmatter of these concepts whose documents are not
        built, in one query, for :meth:`fields_of` to hand out (each once): a query each was
        about a tenth of a restarted server's first subgraph, each one also giving the
        interpreter lock to the warm-up."""
        rows = self._rows
        if rows is None:
            return
        paths, cells = self._paths, self._documents.cells
        # Not those built, nor those whose cell holds their frozen frontmatter (fields_of).
        wanted = [paths[c] for c in concept_ids if c in paths and not self.is_built(c)
                  and not cells[paths[c]].early(FROZEN_FIELDS)[0]]
        if wanted:
            rows.read_ahead_frontmatter(wanted)

    def is_built(self, concept_id: str) -> bool:
        """Whether the document at the concept's path is built (``False`` for an ID no file
        would be); nothing is built or checked to tell."""
        path = self._paths.get(concept_id)
        return path is not None and self._documents.cells[path].peek() is not None

    @property
    def paths(self) -> Mapping[str, str]:
        """Concept ID → the path of the file that is that concept if it parses, sorted by ID
        (what a capture after a change patches instead of listing every file again)."""
        return types.MappingProxyType(self._paths)

    def _ids(self) -> tuple[str, ...]:
        return self._memo.get("ids", self._listed)

    def _listed(self) -> tuple[str, ...]:
        """The concept IDs whose files parse, in path order: :meth:`__contains__` for each
        listed path, without its checks of what a listed ID already is."""
        cells = self._documents.cells
        return tuple(concept_id for concept_id, path in self._paths.items()
                     if cells[path].parse_error() is None)

    def __iter__(self) -> Iterator[str]:
        return iter(self._ids())

    def __len__(self) -> int:
        return len(self._ids())

    def items(self) -> ItemsView[str, Document]:
        return _ConceptItems(self)

    def values(self) -> ValuesView[Document]:
        return _ConceptValues(self)

    def _pairs(self) -> Iterator[tuple[str, Document]]:
        # Each listed ID is known to parse: no second membership check per concept, which
        # Mapping's own views make (a tool that scans every concept pays it 10,000 times).
        documents, paths, rows = self._documents, self._paths, self._rows
        ids = self._ids()
        if rows is None:
            for concept_id in ids:
                yield concept_id, documents[paths[concept_id]]
            return
        # A call that meets a restarted server before its warm-up built the documents builds
        # them here: each group's rows in one query, as the warm-up reads them, not one query
        # a document (at 9,978 concepts a new search_sections question took 1.7 s less).
        cells = documents.cells
        for start in range(0, len(ids), READ_AHEAD_GROUP):
            group = [(concept_id, paths[concept_id])
                     for concept_id in ids[start:start + READ_AHEAD_GROUP]]
            unbuilt = [path for _, path in group if cells[path].peek() is None]
            if len(unbuilt) >= MIN_READ_AHEAD:
                rows.read_ahead_entries(unbuilt)
            for concept_id, path in group:
                yield concept_id, documents[path]


class _ConceptItems(ItemsView[str, Document]):
    _mapping: Concepts

    def __iter__(self) -> Iterator[tuple[str, Document]]:
        return self._mapping._pairs()


class _ConceptValues(ValuesView[Document]):
    _mapping: Concepts

    def __iter__(self) -> Iterator[Document]:
        return (doc for _, doc in self._mapping._pairs())


class InboundHint(Protocol):
    """Which documents may hold an edge to a concept, from an index kept outside the snapshot
    (the parse cache's ``targets``), so a one-concept call need not build every document to
    find the edges into it (:meth:`Snapshot.edges_of`); and the whole-bundle values an earlier
    process kept for a revision (edge lists; JSON values: the graph's tag members and types,
    the search indexes' statistics, search_concepts' columns; packed values: its body word
    index), so that a restart's first call builds no document for them."""

    def sources(self, concept_id: str, records: Mapping[str, str]) -> frozenset[str] | None:
        """The paths among ``records`` (path → SHA-256 of its bytes) whose document may link or
        relate to ``concept_id``: every file the index says does, and every file it does not
        know. ``None`` when it cannot tell (the caller then looks at every document)."""
        ...

    def stored_edges(self, revision: str, name: str) -> tuple[Edge, ...] | None:
        """A list of edges an earlier process kept for this revision under ``name``
        (:meth:`keep_edges`: :attr:`Snapshot.edges`, ``okf.graph.field_edges``), ``None`` when
        none is kept or it does not read back. The caller checks the order it keeps them in.
        Such edges are a function of the Markdown files, which the revision names."""
        ...

    def stored_edge_columns(self, revision: str, name: str) -> KeptEdgeColumns | None:
        """:meth:`stored_edges` as read, before any edge is made (:class:`EdgeColumns`)."""
        ...

    def keep_edges(self, revision: str, name: str, edges: tuple[Edge, ...]) -> None:
        """Keep a revision's edges for the next process (written in the background)."""
        ...

    def stored_json(self, revision: str, name: str) -> Any:
        """A JSON value an earlier process kept for this revision under ``name``
        (:meth:`keep_json`), ``None`` when none is kept or it does not read back. The caller
        checks its shape."""
        ...

    def keep_json(self, revision: str, name: str, value: Any) -> None:
        """Keep a JSON value (never ``None``) of a revision for the next process."""
        ...

    def derived(self, path: str, sha256: str, key: str) -> Any:
        """The value of a document's derived structure (JSON data) an earlier process kept for
        these bytes under ``key`` (``derived.stored_key``), ``None`` when none is kept: what
        ``Document.stored`` reads, for a document not built (``derived.of_concept``)."""
        ...

    def read_ahead_entries(self, paths: Sequence[str]) -> None:
        """Read the rows these files' documents are built from at once, for the builds that
        follow (each handed out once) instead of a query each: the warm-up's documents step
        calls it for each group of documents not built yet."""
        ...

    def read_ahead_frontmatter(self, paths: Sequence[str]) -> None:
        """Read the frontmatter of these files' rows at once, for :meth:`frontmatter` to hand
        out (each once) instead of a query each: a call about to read the cards of hundreds
        of concepts whose documents are not built (a restarted server's first subgraph)."""
        ...

    def read_ahead(self, key: str, paths: Sequence[str] | None = None) -> None:
        """Read every document's value kept under ``key`` at once, for :meth:`derived` to hand
        out (each once) instead of a query each: a warm-up about to read them all calls it.
        ``paths``: only these files' values, added to those read ahead before (a call about to
        read a group of them); the caller asks for each, or holds them until the rows go."""
        ...

    def kept_rows(self) -> int:
        """How many files had a row when the rows were read (0 when an earlier process kept
        none: a cold start)."""
        ...

    def frontmatter(self, path: str, sha256: str) -> Unfrozen | None:
        """The frontmatter of these bytes as their row keeps it (held as read, frozen on first
        use; an empty one when the file has none), ``None`` when there is no such row, it is
        damaged, or the bytes do not parse: then the document is built to know."""
        ...

    def stored_bytes(self, revision: str, name: str) -> bytes | None:
        """Bytes an earlier process kept for this revision under ``name`` (:meth:`keep_bytes`):
        a value with its own packing (search_concepts' body word index), ``None`` when none is
        kept. The caller checks that they unpack whole."""
        ...

    def section_words(self, version: str, terms: Sequence[str], weights: tuple[int, int, int]
                      ) -> KeptSectionWords | None:
        """The documents whose sections' words are kept, cut by the rules ``version`` names,
        and each term's count in each of their sections holding it (its occurrences in the
        section's text, heading and title weighted by ``weights``), read at once; ``None``
        when none can be read."""
        ...

    def keep_section_words(self, version: str,
                           documents: Iterable[tuple[str, str, SectionRows]]) -> bool:
        """Keep each document's sections' words (path, SHA-256 of the bytes, rows) for the
        next call and process, unless kept already; ``False`` when they cannot be kept."""
        ...

    def keep_bytes(self, revision: str, name: str, value: bytes | Iterable[bytes]) -> None:
        """Keep a packed value of a revision for the next process, in place of the value kept
        under ``name`` for another revision (only a process on the same files reads it). Given
        in pieces, the pieces are made and compressed one at a time, in the background: a
        value of tens of megabytes is never held whole."""
        ...


# Past this many files changed since the predecessor, every file is asked again whether it
# parses (as quick by then).
MAX_RECHECKED_FILES = 64


def _no_predecessor() -> Snapshot | None:
    return None


# How many earlier captures a snapshot can reach (:meth:`Snapshot.earlier`).
EARLIER_KEPT = 4


class Ancestry:
    """Weak references to the captures before a snapshot, nearest first: called, the nearest
    (what :attr:`Snapshot.predecessor` answers). Changes in quick succession leave captures
    nothing held, so the nearest may be gone, or never warmed, while one before it still
    holds a structure a successor can update (:meth:`Snapshot.earlier`)."""

    __slots__ = ("_refs",)

    def __init__(self, earlier: Snapshot) -> None:
        before = earlier.predecessor
        rest = before.refs if isinstance(before, Ancestry) else ()
        self._refs: tuple[weakref.ref[Snapshot], ...] = (
            weakref.ref(earlier), *rest[:EARLIER_KEPT - 1])

    @property
    def refs(self) -> tuple[weakref.ref[Snapshot], ...]:
        return self._refs

    def __call__(self) -> Snapshot | None:
        return self._refs[0]()

    def live(self) -> list[Snapshot]:
        """The earlier captures still held, nearest first."""
        return [found for found in (ref() for ref in self._refs) if found is not None]


def predecessor_link(earlier: Snapshot | None) -> Callable[[], Snapshot | None]:
    """What :attr:`Snapshot.predecessor` holds for a capture that followed ``earlier``."""
    return Ancestry(earlier) if earlier is not None else _no_predecessor


@dataclass(frozen=True)
class Snapshot:
    """One immutable capture of a bundle.

    ``documents`` holds every captured ``.md`` file by path (broken ones included, with their
    ``parse_error``); ``concepts`` holds the parseable concepts by ID, sorted by ID.
    """

    revision: str
    # Any mapping is accepted (the Python API, tests) and kept as :class:`Documents`.
    documents: Documents
    concepts: Mapping[str, Document]
    assets: frozenset[str]
    directories: frozenset[str]
    skipped: tuple[Diagnostic, ...]
    memo: Memo = field(default_factory=Memo, repr=False, compare=False)
    # Assets whose bytes were read, by path; their records count in ``revision``.
    attachments: Mapping[str, Attachment] = field(default_factory=lambda: _NO_ATTACHMENTS)
    # Where edges into a concept may come from, when an index can tell (speed only: never an
    # answer's input, so it takes no part in equality).
    inbound: InboundHint | None = field(default=None, repr=False, compare=False)
    # The snapshot this one was captured after, while something still holds it (a weak
    # reference: a snapshot never keeps an older one in memory; the warm-up holds the last one
    # it warmed until this one is warm, its memo emptied but for the ``carried`` slots), so a
    # structure that can be updated from the older snapshot's value need not be built anew
    # (``okf.suggest``). Speed only, like ``inbound``.
    predecessor: Callable[[], Snapshot | None] = field(
        default=_no_predecessor, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.documents, Documents):
            object.__setattr__(self, "documents", Documents.of(self.documents))

    @property
    def loaded(self) -> bool:
        """Whether this capture was loaded from the files, not captured after an earlier one
        of this process (a start, a restart): a whole-bundle value it builds is worth keeping
        for the next process, whereas after a change this process updates its own."""
        return self.predecessor is _no_predecessor

    def earlier(self) -> list[Snapshot]:
        """The captures before this one that something still holds, nearest first (at most
        :data:`EARLIER_KEPT`): :attr:`predecessor`'s, then the ones it followed."""
        link = self.predecessor
        if isinstance(link, Ancestry):
            return link.live()
        found = link()
        return [found] if found is not None else []

    def release_edges(self) -> None:
        """Let go of the edge structures built on first use (:attr:`edges`, their index, the
        record lookups): a replaced snapshot's, which no successor reads
        (:func:`bundle_mcp.derived.release`). Asked for again, they are built again."""
        for name in ("edges", "edges_by_concept", "records", "_shas", "_edge_update",
                     "_edge_columns"):
            self.__dict__.pop(name, None)

    @functools.cached_property
    def broken(self) -> tuple[Document, ...]:
        """The documents that do not parse, in walk order. Every call asks (the parse policy),
        so after a change the predecessor's answer is reused for the files that did not change
        (the same cell, so the same parse), instead of asking all 10,000 files again."""
        earlier = self.predecessor()
        if earlier is not None and "broken" in earlier.__dict__:
            changed = self.documents.differing(earlier.documents)
            if len(changed) <= MAX_RECHECKED_FILES:
                cells = self.documents.cells
                now = {doc.path for doc in earlier.broken if doc.path in cells} - set(changed)
                now.update(p for p in changed if p in cells and cells[p].parse_error() is not None)
                return tuple(self.documents[p] for p in cells if p in now) if now else ()
        return self.documents.broken()

    @functools.cached_property
    def root_index(self) -> Document | None:
        return self.documents.get("index.md")

    @functools.cached_property
    def records(self) -> tuple[FileRecord, ...]:
        return self.documents.records()

    @functools.cached_property
    def edges(self) -> tuple[Edge, ...]:
        """Every resolved link and relation, deduplicated, sorted by (kind, from, to,
        relation_type); field edges are kept beside them (``okf.graph.field_edges``).

        After a change, the predecessor's edges are updated when it still holds them
        (:meth:`_edge_update`): the same :class:`Edge` objects for every file that did not
        change, where building them all again held a second set of 130,000 edges beside the
        predecessor's until it was let go (the highest point of an edit's warm-up)."""
        update = self._edge_update
        if update is not None:
            return update.edges
        # Kept by an earlier process on the same files, they need no document's Markdown facts.
        return revision_edges(self, STORED_EDGES, _in_edge_order, self._edges_built)

    def _edges_built(self) -> tuple[Edge, ...]:
        out: list[Edge] = []
        for doc in self.concepts.values():
            out.extend(self._edges_from(doc))
        out.sort(key=edge_order)
        return tuple(out)

    @functools.cached_property
    def _edge_update(self) -> _EdgeUpdate | None:
        """The predecessor's edges with those of the changed files made again; None when
        there is no predecessor holding its edges, or too many files changed.

        An edge depends on its source's document and on whether its target is a concept. So
        the edges out of the concepts at changed paths (before or after) are made again, the
        edges into a concept that is gone are dropped, and a concept that is new has the edges
        out of every concept whose links or relations name it made again (a look at each
        concept's kept facts, no parse); a concept's ID is read from its document, as the
        concept list does."""
        earlier = self.predecessor()
        if earlier is None or "edges" not in earlier.__dict__:
            return None
        changed = self.documents.differing(earlier.documents)
        if len(changed) > MAX_RECHECKED_FILES:
            return None
        redone: set[str] = set()
        added: set[str] = set()
        for path in changed:
            now, before = _concept_at(self, path), _concept_at(earlier, path)
            if now is not None:
                if now not in earlier.concepts:
                    added.add(now)
                redone.add(now)
            if before is not None:
                redone.add(before)
        if added:
            redone.update(cid for cid, doc in self.concepts.items()
                          if cid not in redone and _names_any(doc, added))
        gone = {cid for cid in redone if cid not in self.concepts}
        kept: list[Edge] = []
        dropped: list[Edge] = []
        for edge in earlier.edges:
            (dropped if edge.source_id in redone or edge.target_id in gone else kept).append(edge)
        made = sorted((edge for cid in sorted(redone - gone)
                       for edge in self._edges_from(self.concepts[cid])), key=edge_order)
        for edge in made:
            bisect.insort(kept, edge, key=edge_order)
        touched = {*redone, *(e.source_id for e in dropped), *(e.target_id for e in dropped),
                   *(e.target_id for e in made)}
        return _EdgeUpdate(tuple(kept), earlier, tuple(dropped), tuple(made), frozenset(touched))

    def concept_path(self, concept_id: str) -> str:
        """The path of a concept's file, without building its document (``KeyError`` for an
        ID no file would be)."""
        concepts = self.concepts
        if isinstance(concepts, Concepts):
            return concepts.paths[concept_id]
        return concepts[concept_id].path

    def fields_of(self, concept_id: str) -> Mapping[str, Any]:
        """``concepts[concept_id].fields``, without building the document when its parse
        cache row has them (:meth:`Concepts.fields_of`)."""
        concepts = self.concepts
        if isinstance(concepts, Concepts):
            return concepts.fields_of(concept_id)
        return concepts[concept_id].fields

    def concept_edges(self, concept_id: str) -> tuple[Edge, ...]:
        """Every link and relation touching one concept, in edge order: ``edges_by_concept.get(
        concept_id, ())``. Before that index is built, on a snapshot whose edges an earlier
        process kept, they are read from the kept edges' columns (:class:`EdgeColumns`): a
        restarted server's first walk or question makes the edges of the concepts it visits,
        not the bundle's 130,000 and their index."""
        if "edges_by_concept" not in self.__dict__:
            columns = self._edge_columns
            found = None if columns is None else columns.of(concept_id)
            if found is None:
                found = self._fetched.get(concept_id)
            if found is not None:
                return found
        return self.edges_by_concept.get(concept_id, ())

    def edges_indexed(self) -> bool:
        """Whether :attr:`edges_by_concept` is made already: a concept's edges are then read
        from it, not made from the kept edge columns."""
        return "edges_by_concept" in self.__dict__

    def edges_at_hand(self, concept_id: str) -> bool:
        """Whether :meth:`concept_edges` answers ``concept_id`` without making the index of
        every edge: made already, read from the kept edge columns, or fetched for it."""
        if "edges_by_concept" in self.__dict__ or concept_id in self._fetched:
            return True
        columns = self._edge_columns
        return columns is not None and columns.of(concept_id) is not None

    def edges_made(self) -> bool:
        """Whether :attr:`edges` is made already (reading it then costs nothing)."""
        return "edges" in self.__dict__

    def edge_count(self) -> int:
        """``len(edges)``: while they are not made, from the columns an earlier process kept
        for this revision, when it did."""
        if "edges" not in self.__dict__:
            columns = self._edge_columns
            if columns is not None:
                return columns.count
        return len(self.edges)

    def edge_at(self, position: int) -> Edge:
        """``edges[position]``: while they are not made, that edge alone, made from the
        columns an earlier process kept for this revision, when it did (a restarted server's
        first walk reports a few edges of the 130,000)."""
        if "edges" not in self.__dict__:
            columns = self._edge_columns
            if columns is not None:
                return columns.edge(position)
        return self.edges[position]

    @functools.cached_property
    def _edge_columns(self) -> EdgeColumns | None:
        """The kept edges of this revision as read (``None`` when none are kept, or after a
        change: those are the predecessor's, updated). Let go once the index is built."""
        if self.inbound is None or self._edge_update is not None:
            return None
        found = self.inbound.stored_edge_columns(self.revision, STORED_EDGES)
        return None if found is None else EdgeColumns.read(found)

    def outgoing_edges(self, concept_id: str) -> tuple[Edge, ...]:
        """The resolved edges from one concept, in :attr:`edges` order: the same edges as
        ``[e for e in edges if e.source_id == concept_id]``, from that concept's own links and
        relations alone, so a one-concept call parses one document instead of the bundle."""
        if "edges_by_concept" in self.__dict__:
            # Built (the warm-up builds it): its edges of the concept, in edge order, cost no
            # decoding of the concept's Markdown facts.
            return tuple(e for e in self.edges_by_concept.get(concept_id, ())
                         if e.source_id == concept_id)
        doc = self.concepts.get(concept_id)
        return tuple(sorted(self._edges_from(doc), key=edge_order)) if doc is not None else ()

    def _edges_from(self, doc: Document) -> list[Edge]:
        """One concept's resolved links and relations, each edge once (an edge's identity is
        its kind, its two references and its relation type; no two sources share an edge)."""
        src = doc.concept_id
        assert src is not None
        seen: set[tuple[str, str, str, str | None]] = set()
        out: list[Edge] = []
        for link in doc.markdown.links:
            tid = link.concept_id
            if tid is None or tid not in self.concepts:
                continue
            key: tuple[str, str, str, str | None] = (NAVIGATION, src, tid, None)
            if key not in seen:
                seen.add(key)
                out.append(Edge(NAVIGATION, src, tid, src, tid, LINKS_TO))
        for rel in doc.relations:
            if rel.target_id not in self.concepts:
                continue
            key = (RELATION, rel.source, rel.target, rel.relation_type)
            if key not in seen:
                seen.add(key)
                out.append(
                    Edge(RELATION, src, rel.target_id, rel.source, rel.target,
                         rel.relation_type)
                )
        return out

    def edges_of(self, concept_id: str) -> tuple[Edge, ...]:
        """Every edge touching one concept, in edge order: ``edges_by_concept.get(concept_id,
        ())``, building that concept and the documents that may link or relate to it instead
        of every document (the edges out of the concept come from its own links; the edges into
        it from the documents that may hold one). Those are the ones an :class:`InboundHint`
        names or does not know, and of the files to be parsed, only those whose text may name
        the concept (``okf.mentions``: a cold start reads the files' text, and parses a few)."""
        if "edges_by_concept" in self.__dict__:
            return self.edges_by_concept.get(concept_id, ())
        columns = self._edge_columns
        if columns is not None:
            found = columns.of(concept_id)
            return found if found is not None else self.edges_by_concept.get(concept_id, ())
        fetched = self._fetched.get(concept_id)
        if fetched is not None:
            return fetched
        if self.concepts.get(concept_id) is None:
            return ()
        edges = self._edges_into((concept_id,))
        if edges is None:
            return self.edges_by_concept.get(concept_id, ())
        self._fetched[concept_id] = edges[0]
        return edges[0]

    def prefetch_edges(self, concept_ids: Iterable[str]) -> None:
        """Make the edges of these concepts now, in one pass over the files that may name any
        of them (:meth:`edges_of`'s way), when the index of every edge is not made and no
        earlier process kept them: a walk asks this of each level before it expands the
        level's nodes one by one (:meth:`concept_edges` then reads them). Past
        :data:`MAX_PREFETCHED` concepts it does nothing: the walk builds every edge, as most
        files then name one of them."""
        if "edges_by_concept" in self.__dict__ or self._edge_columns is not None:
            return
        fetched = self._fetched
        concepts = self.concepts
        wanted = tuple(sorted({c for c in concept_ids
                               if c not in fetched and concepts.get(c) is not None}))
        if not wanted or len(wanted) > MAX_PREFETCHED:
            return
        edges = self._edges_into(wanted)
        if edges is not None:
            fetched.update(zip(wanted, edges, strict=True))

    @functools.cached_property
    def _fetched(self) -> dict[str, tuple[Edge, ...]]:
        """The edges :meth:`prefetch_edges` and :meth:`edges_of` made concept by concept
        before the index of every edge (each a pure function of the snapshot, so a race
        stores two equal values)."""
        return {}

    def _edges_into(self, concept_ids: tuple[str, ...]) -> list[tuple[Edge, ...]] | None:
        """:meth:`edges_of` of each concept (every one a concept of this snapshot), reading
        each file that may name any of them once; None when the index of every edge is the
        cheaper way (no index and documents handed in built, or a predecessor's edges to
        update)."""
        every: frozenset[str] | None = None
        wanted: dict[str, frozenset[str]] = {}
        for concept_id in concept_ids:
            found = (None if self.inbound is None
                     else self.inbound.sources(concept_id, self._shas))
            if found is None:  # no index, or one that cannot be read: every concept may
                concepts = self.concepts
                if not isinstance(concepts, Concepts) or self._edge_update is not None:
                    return None  # documents handed in built, or edges to update: cheaper
                if every is None:
                    every = frozenset(concepts.paths.values())
                found = every
            wanted[concept_id] = found
        sources = frozenset().union(*wanted.values())
        names: dict[str, tuple[str, ...]] = {path: concept_ids for path in sources}
        documents = self.documents
        if isinstance(documents, Documents):
            cells = documents.cells
            names = {path: cells[path].named(concept_ids) for path in sources}
        # Each concept's candidate files, in path order, from one pass over them all (not a
        # sort of every file per concept).
        candidates: dict[str, list[str]] = {concept_id: [] for concept_id in concept_ids}
        for path in sorted(sources):
            for concept_id in names[path]:
                if path in wanted[concept_id]:
                    candidates[concept_id].append(path)
        found_edges: list[tuple[Edge, ...]] = []
        made: dict[str, list[Edge]] = {}
        for concept_id in concept_ids:
            out = self._edges_from(self.concepts[concept_id])
            for path in candidates[concept_id]:
                source = self.documents.get(path)
                if source is None or source.concept_id in (None, concept_id) or (
                        source.concept_id not in self.concepts):
                    continue  # not a concept (an index, a broken file), or the concept itself
                edges = made.get(path)
                if edges is None:
                    edges = made[path] = self._edges_from(source)
                out.extend(e for e in edges if e.target_id == concept_id)
            out.sort(key=edge_order)
            found_edges.append(tuple(out))
        return found_edges

    @functools.cached_property
    def _shas(self) -> Mapping[str, str]:
        return {record.path: record.sha256 for record in self.records}

    @functools.cached_property
    def edges_by_concept(self) -> Mapping[str, tuple[Edge, ...]]:
        """Every edge touching a concept (as source or target), in edge order: after a change,
        the predecessor's index with the touched concepts' entries made again
        (:meth:`_edge_update`), when the predecessor still holds it."""
        edges = self.edges
        # Its work is done once this is built.
        update: _EdgeUpdate | None = self.__dict__.pop("_edge_update", None)
        earlier = update.predecessor() if update is not None else None
        if update is not None and earlier is not None and (
                "edges_by_concept" in earlier.__dict__):
            return update.index(earlier.edges_by_concept, self.concepts)
        index: dict[str, list[Edge]] = {}
        for edge in edges:
            index.setdefault(edge.source_id, []).append(edge)
            if edge.target_id != edge.source_id:
                index.setdefault(edge.target_id, []).append(edge)
        # What the index answers from now on.
        self.__dict__.pop("_edge_columns", None)
        self.__dict__.pop("_fetched", None)
        return types.MappingProxyType({k: tuple(v) for k, v in index.items()})


class _EdgeUpdate:
    """How a snapshot's edges differ from its predecessor's (``Snapshot._edge_update``): its
    edges, those of the predecessor's it dropped and those it made, and the concepts they
    touch. Holds the predecessor weakly, as the snapshot does."""

    __slots__ = ("edges", "predecessor", "_dropped", "_made", "_touched")

    def __init__(self, edges: tuple[Edge, ...], earlier: Snapshot, dropped: tuple[Edge, ...],
                 made: tuple[Edge, ...], touched: frozenset[str]) -> None:
        self.edges = edges
        self.predecessor = weakref.ref(earlier)
        self._dropped, self._made, self._touched = dropped, made, touched

    def index(self, earlier: Mapping[str, tuple[Edge, ...]], concepts: Mapping[str, Document]
              ) -> Mapping[str, tuple[Edge, ...]]:
        """``earlier`` (the predecessor's edges by concept) with the touched concepts' entries
        made again: the entries of every other concept are the predecessor's tuples."""
        index = dict(earlier)
        dropped = {id(edge) for edge in self._dropped}
        for concept_id in self._touched:
            entry = [edge for edge in index.pop(concept_id, ()) if id(edge) not in dropped]
            if concept_id in concepts:
                entry.extend(edge for edge in self._made
                             if concept_id in (edge.source_id, edge.target_id))
            if entry:
                entry.sort(key=edge_order)
                index[concept_id] = tuple(entry)
        return types.MappingProxyType(index)


def _names_any(doc: Document, concept_ids: set[str]) -> bool:
    """Whether one of ``doc``'s links or relations targets one of ``concept_ids``."""
    return any(rel.target_id in concept_ids for rel in doc.relations) or (
        doc.rules.may_link_to(doc, concept_ids)
        and any(link.concept_id in concept_ids for link in doc.markdown.links))


def _concept_at(snapshot: Snapshot, path: str) -> str | None:
    """The ID of the concept ``snapshot`` holds at ``path``, None when it holds none there."""
    if path not in snapshot.documents:
        return None
    concept_id = snapshot.documents[path].concept_id
    if concept_id is None or concept_id not in snapshot.concepts:
        return None
    return concept_id if snapshot.concepts[concept_id].path == path else None


# The name :attr:`Snapshot.edges` are kept under (InboundHint.keep_edges).
STORED_EDGES = "links-and-relations"


def revision_edges(snapshot: Snapshot, name: str,
                   accepted: Callable[[tuple[Edge, ...]], bool],
                   build: Callable[[], tuple[Edge, ...]]) -> tuple[Edge, ...]:
    """A whole-bundle edge list of the snapshot's revision: what an earlier process on the
    same files kept under ``name`` (the parse cache's rows, :attr:`Snapshot.inbound`) when
    ``accepted`` (its order and kinds) says it reads back whole, else built and kept: then no
    document is built for it."""
    store = snapshot.inbound
    if store is not None:
        kept = store.stored_edges(snapshot.revision, name)
        if kept is not None and accepted(kept):
            return kept
    edges = build()
    if store is not None:
        store.keep_edges(snapshot.revision, name, edges)
    return edges


def outside_revision(snapshot: Snapshot) -> list[Any]:
    """What a whole-bundle value may depend on besides the Markdown files' bytes, which the
    revision covers: the assets, the folders, the skipped entries and the attachments, as JSON
    data (a kept value's name holds a digest of it, beside the revision)."""
    attachments = [[path, None if a.record is None else a.record.sha256, a.problem]
                   for path, a in sorted(snapshot.attachments.items())]
    return [sorted(snapshot.assets), sorted(snapshot.directories),
            [d.as_row() for d in snapshot.skipped], attachments]


def revision_value(snapshot: Snapshot, name: str, decode: Callable[[Any], _T | None],
                   build: Callable[[], _T], encode: Callable[[_T], Any]) -> _T:
    """:func:`revision_edges` for a value kept as JSON: ``decode`` takes what was kept
    (``None`` when nothing was) and returns the value, or ``None`` when it does not have the
    shape it was kept in; ``encode`` gives the JSON to keep, ``None`` to keep nothing."""
    store = snapshot.inbound
    if store is not None:
        found = decode(store.stored_json(snapshot.revision, name))
        if found is not None:
            return found
    value = build()
    stored = None if store is None else encode(value)
    if store is not None and stored is not None:
        store.keep_json(snapshot.revision, name, stored)
    return value


@dataclass(frozen=True, slots=True)
class KeptEdgeColumns:
    """A revision's kept edges as read (:meth:`InboundHint.stored_edge_columns`): their
    distinct strings, six numbers an edge into them in :class:`Edge`'s field order, and the
    edges touching each string as a source or target ID, ascending: string ``n``'s positions
    are ``positions[starts[n]:starts[n + 1]]``."""

    table: list[str]
    numbers: array[int]
    starts: array[int]
    positions: array[int]


# One document's sections as search_sections keeps their words (InboundHint.keep_section_words):
# each section's (text, heading, title) as folded words, space-separated.
SectionRows = Sequence[tuple[str, str, str]]


@dataclass(frozen=True, slots=True)
class KeptSectionWords:
    """What one read of the kept section words found (:meth:`InboundHint.section_words`): each
    document whose sections' words are kept, by its number (path, SHA-256 of the bytes, how
    many sections), and for each term asked, (row, weighted count) of each section holding it
    in row order, a section's row being its document's number shifted left by
    :data:`SECTION_ROW_SHIFT` plus its number in the document. ``docs`` is the same object from
    read to read while no document is added (a caller may keep what it derived from it)."""

    docs: Mapping[int, tuple[str, str, int]]
    counts: Mapping[str, list[tuple[int, int]]]


# A section's row in the kept section words: its document's number past any section number.
SECTION_ROW_SHIFT = 32


class EdgeColumns:
    """A revision's links and relations as an earlier process kept them, read but not made
    (:class:`KeptEdgeColumns`). :meth:`of` makes one concept's edges from the positions the
    kept index gives it, each edge object once (a walk meets an edge from both ends); the
    ~130,000 edge objects of a 10,000-concept bundle and their index are made all at once only
    by :attr:`Snapshot.edges_by_concept`.

    The index is kept, not made from the numbers on the first call, and what the columns say
    is checked concept by concept as its edges are made (:meth:`of`), not for every edge when
    they are read: both were most of a restarted server's first get_neighbors before its
    warm-up had built the edges (150 → 100 ms at 9,978 concepts)."""

    __slots__ = ("_table", "_numbers", "_starts", "_positions", "_number", "_made", "_edges")

    def __init__(self, columns: KeptEdgeColumns) -> None:
        self._table, self._numbers = columns.table, columns.numbers
        self._starts, self._positions = columns.starts, columns.positions
        # Each concept's edges once made: a walk asks for the same concepts again.
        self._made: dict[str, tuple[Edge, ...]] = {}
        self._edges: list[Edge | None] = [None] * (len(self._numbers) // EDGE_FIELDS)
        self._number = dict(zip(self._table, range(len(self._table)), strict=True))

    @classmethod
    def read(cls, columns: KeptEdgeColumns) -> EdgeColumns | None:
        """The columns, when they hold whole edges and the index names strings they have."""
        if len(columns.numbers) % EDGE_FIELDS or len(columns.starts) != len(columns.table) + 1:
            return None
        return cls(columns)

    def of(self, concept_id: str) -> tuple[Edge, ...] | None:
        """The edges touching ``concept_id``, in edge order; ``None`` unless each edge the
        kept index names for it touches it, is a link or a relation, and comes after the one
        before in edge order (a damaged row: the caller builds the edges)."""
        made = self._made.get(concept_id)
        if made is not None:
            return made
        number = self._number.get(concept_id)
        if number is None:
            return self._made.setdefault(concept_id, ())
        numbers = self._numbers
        positions = self._positions[self._starts[number]:self._starts[number + 1]]
        try:
            edges = tuple(map(self._edge, positions))
        except IndexError:  # a number past the strings
            return None
        keys = list(map(edge_order, edges))
        if not (all(numbers[EDGE_FIELDS * p + 1] == number or numbers[EDGE_FIELDS * p + 2] == number
                    for p in positions)
                and all(edge.kind in _KEPT_KINDS for edge in edges)
                and all(map(operator.lt, keys, itertools.islice(keys, 1, None)))):
            return None
        return self._made.setdefault(concept_id, edges)

    @property
    def count(self) -> int:
        """How many edges the columns hold."""
        return len(self._edges)

    def edge(self, position: int) -> Edge:
        """The edge at ``position`` in edge order (``IndexError`` past them)."""
        if position < 0:
            raise IndexError(position)
        return self._edge(position)

    def _edge(self, position: int) -> Edge:
        edge = self._edges[position]
        if edge is None:
            at = EDGE_FIELDS * position
            edge = self._edges[position] = Edge(
                *map(self._table.__getitem__, self._numbers[at:at + EDGE_FIELDS]))
        return edge


EDGE_FIELDS = len(Edge._fields)  # the numbers an edge in its kept columns
_KEPT_KINDS = frozenset((NAVIGATION, RELATION))


def _in_edge_order(edges: tuple[Edge, ...]) -> bool:
    """Whether kept edges read back are links and relations in :attr:`Snapshot.edges` order
    (each edge's key made once, the kinds and the pairs compared in C: a restart's 130,000
    edges in about a quarter of the time a pairwise generator took)."""
    if not set(map(edge_kind, edges)) <= _KEPT_KINDS:
        return False
    keys = list(map(edge_order, edges))
    return all(map(operator.le, keys, itertools.islice(keys, 1, None)))


# An edge's key in edge order, (kind, from, to, relation type): a link's relationship is
# always LINKS_TO, so ordering by it orders as a missing relation type would. Edge's fields
# 0, 3, 4 and 5 picked in C (every sort and check of a bundle's edges calls it per edge).
edge_order: Callable[[Edge], tuple[str, str, str, str]] = operator.itemgetter(0, 3, 4, 5)
# Each of Edge's fields picked in C, for passes over a bundle's edges (map over 130,000 of
# them runs without a Python call per edge).
edge_kind: Callable[[Edge], str] = operator.itemgetter(0)
edge_source_id: Callable[[Edge], str] = operator.itemgetter(1)
edge_target_id: Callable[[Edge], str] = operator.itemgetter(2)
edge_source_ref: Callable[[Edge], str] = operator.itemgetter(3)
edge_target_ref: Callable[[Edge], str] = operator.itemgetter(4)
edge_relationship: Callable[[Edge], str] = operator.itemgetter(5)
