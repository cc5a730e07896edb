"""The transport-free core: validate → resolve bundle → snapshot → run → budget → validate.

``Dispatcher.call`` is the only way a tool runs, for the MCP server and for ``bundle-mcp call``
alike. Every failure leaves it as an :class:`Outcome` carrying the error envelope; only an unknown
tool name escapes as :class:`UnknownTool`, because that is a protocol error, not a tool result.
This is also the one place (with the server boundary) that catches every exception: a bug becomes
``internal_error`` with the traceback in the server log and nothing of it in the reply.
"""

from __future__ import annotations

import functools
import json
import logging
import re
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic_core import PydanticSerializationError
from pydantic_core import to_json as pydantic_json

from . import stored_answers
from .cancel import CancelToken
from .contracts import ContractSet, internal_error
from .derived import Slot, of_snapshot
from .errors import (
    ERROR,
    INVALID_YAML_GRAPH,
    OPERATION_REJECTED,
    RESOURCE_LIMIT,
    BundleError,
    BundleMcpError,
    Diagnostic,
    FileMoved,
    invalid_request,
    recovery_step,
    resource_limit,
)
from .loader import PENDING_WRITE
from .loader.views import reader_view
from .model import Document, Memo, Snapshot, canonical_json
from .observe import Notice
from .pieces import PackedBytes, Pieces, Whole
from .readers import ALL_READER, Reader
from .serve_config import ServeConfig
from .snapshots import SnapshotCache
from .storage.handles import check_bundle_path
from .storage.refusals import read_only_rejection
from .tools import TOOL_MODULES, load_tools
from .toolspec import SEMANTIC_TOOLSET, TOOLSETS, CallContext, PartStore, ToolSpec

__all__ = ["ANSWERS", "SLOTS", "CallGate", "Dispatcher", "Outcome", "ServeConfig", "ServedTool",
           "UnknownTool", "to_json"]

if TYPE_CHECKING:
    from .remote.location import BundleSource
    from .remote.mounts import RemoteMounts
    from .semantic import SemanticIndex

log = logging.getLogger(__name__)
# One line per call of a named reader (serve --readers turns it on at INFO).
calls_log = logging.getLogger("bundle_mcp.calls")

MIB = 1024 * 1024
TEXT_BUDGET = 64 * MIB
# Finished answers kept per snapshot (ToolSpec.cache_results): the default call of each large
# tool and a few variants. Each may be megabytes, so the number is small.
MAX_KEPT_ANSWERS = 6
# Their builder is the tool itself, run through this dispatcher (contracts, parse policy, the
# reader's view), so the warm-up runs the default calls of :meth:`Dispatcher.kept_answer_tools`
# rather than a ``warm`` of the slot.
ANSWERS: Slot[Memo] = Slot(
    "answers", "snapshot",
    "finished answers of the tools that keep them (ToolSpec.cache_results), by arguments",
)
SLOTS = (ANSWERS,)
# How often one call is answered again when a file changes under the snapshot it reads (errors.
# FileMoved); a bundle rewritten faster than that gets a retryable cancellation instead.
MOVED_ATTEMPTS = 3
# The envelope holds at most 10,000 diagnostics (error.schema.json): the broken files listed and
# the recovery step. A bundle past the default file cap (--max-files) can have more broken files.
MAX_LISTED_BROKEN = 9_999

_BUNDLE_FIELD = "$.bundle_path"


@dataclass(frozen=True)
class _Refused:
    """A kept answer's call refused because the answer is over its budget, kept in its place:
    each call raises a new error from it (an exception raised again would gather every call's
    traceback)."""

    code: str
    message: str
    diagnostics: tuple[Diagnostic, ...]

    @classmethod
    def of(cls, refused: BundleError) -> _Refused:
        return cls(refused.code, refused.message, refused.diagnostics)

    def error(self) -> BundleError:
        return BundleError(self.code, self.message, self.diagnostics)


@dataclass(frozen=True)
class WireJson:
    """An outcome's two values as the MCP SDK encodes them on the wire (``pydantic_core``), as
    pieces written in turn: the structured content, and the text block's JSON string. A kept
    answer holds its structured encoding compressed (:class:`~bundle_mcp.pieces.PackedBytes`) and
    makes the JSON string from it as it is written (:class:`JsonStringPieces`)."""

    structured: Pieces
    text: Pieces


class JsonStringPieces(Pieces):
    """The UTF-8 text ``source`` as a JSON string, in pieces made on each pass over it: the
    opening quote, each of the source's pieces with its quotes and backslashes escaped, the
    closing quote. Kept, the escaped string cost as much memory as the answer itself (15.8 MB
    beside get_semantic_graph's 14.2 MB at 10,000 concepts, 5.3 MB for list_concepts); made as
    it is written, it costs about 25 ms a pass for the larger and half a mebibyte at a time.
    A piece may start anywhere: the escaped bytes are ASCII, never part of a longer UTF-8
    sequence, so each byte is escaped (or not) alone."""

    __slots__ = ("source", "_size")

    def __init__(self, source: Pieces, size: int) -> None:
        """``size``: the escaped string's length, quotes included, counted by its maker
        (:func:`_json_string_of` from the whole text, :func:`_packed_encoding` part by part)."""
        self.source = source
        self._size = size

    @property
    def size(self) -> int:
        return self._size

    def __iter__(self) -> Iterator[bytes]:
        yield b'"'
        for piece in self.source:
            yield piece.replace(b"\\", b"\\\\").replace(b'"', b'\\"')
        yield b'"'


@dataclass(frozen=True, init=False, eq=False)
class Outcome:
    """One finished call: the structured result or error envelope, and its text block.

    A kept answer whose text block is its result's JSON, the same bytes as the wire's encoding
    of the result (every kept answer so far), holds that JSON once: as :attr:`wire`'s
    ``structured``, from which :attr:`text` is decoded for the paths that ask for the string
    (the SDK's, REST, the CLI: 0.6-13 ms for get_semantic_graph's 14 MB at 10,000 concepts,
    beside the SDK's 0.8 s on it). It was a string beside the bytes, 14 MB more for as long
    as the snapshot lived.

    A kept answer read back from the parse cache after a restart (:mod:`.stored_answers`) has
    only its encoding: its result, too, is decoded from it when a path asks for the object
    (the SDK's, REST), never kept.
    """

    is_error: bool
    # A kept answer's values encoded once when it is kept (by the warm-up, for the default
    # calls), so that a transport that writes them itself (answer_lines) never encodes a repeat.
    wire: WireJson | None = field(default=None, repr=False)
    # The text block, None when it is ``wire.structured`` decoded (above).
    _text: str | None = field(default=None, repr=False)
    # The result object or the error envelope; None when it is ``wire.structured`` decoded.
    _structured: dict[str, Any] | None = field(default=None, repr=False)

    def __init__(self, structured: dict[str, Any] | None, text: str | None, is_error: bool,
                 wire: WireJson | None = None) -> None:
        """``text``: JSON text of ``structured``, or the tool's own text (read_concept: the
        raw file); None only with a ``wire`` whose ``structured`` is that text in UTF-8.
        ``structured`` None: a kept answer read back, whose text and result are both its
        wire's ``structured`` (then ``text`` must be None too)."""
        if text is None and wire is None:
            raise ValueError("an outcome without its text needs the wire's encoding of it")
        if structured is None and text is not None:
            raise ValueError("an outcome without its result is its wire's encoding alone")
        object.__setattr__(self, "_structured", structured)
        object.__setattr__(self, "is_error", is_error)
        object.__setattr__(self, "wire", wire)
        object.__setattr__(self, "_text", text)

    @property
    def structured(self) -> dict[str, Any]:
        """The result object or the error envelope (a kept answer read back decodes its
        encoding anew at each ask)."""
        if self._structured is not None:
            return self._structured
        assert self.wire is not None  # __init__ refuses an outcome with neither
        decoded: dict[str, Any] = json.loads(self.wire.structured.joined())
        return decoded

    @property
    def text(self) -> str:
        """The text block (a kept answer's decompressed and decoded anew at each ask: nothing
        keeps it)."""
        if self._text is not None:
            return self._text
        assert self.wire is not None  # __init__ refuses an outcome with neither
        return self.wire.structured.joined().decode("utf-8")

    @property
    def is_text_encoding(self) -> bool:
        """Whether the text block is the structured encoding's UTF-8 (a kept answer that holds
        its JSON once)."""
        return self._text is None

    @property
    def text_size(self) -> int:
        """The text block's length without decoding a kept one: characters, or the UTF-8
        bytes it is kept as (as many for ASCII, more otherwise)."""
        if self._text is not None:
            return len(self._text)
        assert self.wire is not None
        return self.wire.structured.size

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Outcome):
            return NotImplemented
        return (self.structured, self.text, self.is_error) == (
            other.structured, other.text, other.is_error)

    def encoded(self) -> WireJson | None:
        """:attr:`wire`, or the values encoded now; None when the SDK's encoder refuses them
        (a lone surrogate: the transport then answers ``-32603``)."""
        if self.wire is not None:
            return self.wire
        try:
            return WireJson(Whole(pydantic_json(self.structured)),
                            Whole(pydantic_json(self.text)))
        except PydanticSerializationError:
            return None


@dataclass(frozen=True)
class ServedTool:
    """What a transport advertises for one tool."""

    name: str
    title: str  # for people: "Search concepts"
    description: str
    read_only: bool  # writes nothing (previews included)
    input_schema: Mapping[str, Any]  # the input contract as advertised (contracts.advertised_…)
    output_schema: Mapping[str, Any]  # the output contract OR the error envelope (anyOf)

    def listing(self) -> dict[str, Any]:
        """The tool as ``tools/list`` lists it (MCP's Tool, by its wire names), in the order
        the SDK writes the fields. Previews are read-only: they write nothing. Every write
        replaces or edits files (destructive), and an identical request replays its receipt
        instead of writing again (idempotent)."""
        return {
            "annotations": {
                "destructiveHint": not self.read_only,
                "idempotentHint": True,
                "openWorldHint": False,
                "readOnlyHint": self.read_only,
                "title": self.title,
            },
            "description": self.description,
            "inputSchema": _as_listed(self.input_schema),
            "name": self.name,
            "outputSchema": _as_listed(self.output_schema),
            "title": self.title,
        }


# The keys MCP's schema of a tool's input or output schema declares, in its order: the SDK
# writes them first, then the schema's other keys in their own order.
_DECLARED_SCHEMA_KEYS = ("$schema", "properties", "required", "type")


def _as_listed(schema: Mapping[str, Any]) -> dict[str, Any]:
    """``schema`` with its keys in the order the SDK writes them (:data:`_DECLARED_SCHEMA_KEYS`
    first): the same object, written the same way by every path."""
    listed = {key: schema[key] for key in _DECLARED_SCHEMA_KEYS if key in schema}
    listed.update((key, value) for key, value in schema.items() if key not in listed)
    return listed


class CallGate:
    """The callers' calls in flight: the dispatcher holds it around each of them, and the
    warm-up waits for it to be quiet before each of its steps, and stands aside within one while
    it is busy (``readiness.StepAside``), so the warm-up runs at a lower priority than any
    call."""

    __slots__ = ("_running", "_quiet")

    def __init__(self) -> None:
        self._running = 0
        self._quiet = threading.Condition()

    @contextmanager
    def call(self) -> Iterator[None]:
        """Held while one caller's call runs."""
        with self._quiet:
            self._running += 1
        try:
            yield
        finally:
            with self._quiet:
                self._running -= 1
                if not self._running:
                    self._quiet.notify_all()

    def busy(self) -> bool:
        """Whether a call is in flight now (one read: the warm-up asks it at every check)."""
        return self._running > 0

    def wait_quiet(self, timeout: float | None) -> bool:
        """Wait until no call is in flight, at most ``timeout`` seconds; True when none is."""
        with self._quiet:
            return self._quiet.wait_for(lambda: not self._running, timeout=timeout)


class UnknownTool(BundleMcpError, KeyError):
    """No tool of that name is served (unknown, outside ``--tools``, left out by read-only, or
    search_semantic without the semantic extra)."""


@dataclass(frozen=True)
class _Tool:
    name: str
    spec: ToolSpec
    contracts: ContractSet

    @functools.cached_property
    def served(self) -> ServedTool:
        """What is advertised, made when first listed: advertising the 28 contracts cost a
        restarted server's first call about 100 ms before it could answer (a call checks its
        arguments against the contract itself, not against this)."""
        return ServedTool(
            name=self.name,
            title=self.spec.title,
            description=self.spec.description,
            read_only=self.spec.read_only,
            input_schema=self.contracts.advertised_input_schema(self.name),
            output_schema=self.contracts.advertised_output_schema(self.name),
        )


class _Registry:
    """The tools a dispatcher can serve, by name: the package's (each module imported when
    its tool is first asked for, :func:`bundle_mcp.tools.load_tools`; importing all 28 was
    about 135 ms of a restarted server's first answer, which needs one) or the specs given.
    Every name must have its contract pair, checked at once from the contract files."""

    __slots__ = ("names", "_specs")

    def __init__(self, given: Mapping[str, ToolSpec] | None, contracts: ContractSet) -> None:
        self.names: tuple[str, ...] = tuple(sorted(given)) if given is not None else TOOL_MODULES
        self._specs: dict[str, ToolSpec] = dict(given) if given is not None else {}
        missing = sorted(set(self.names) - set(contracts.tool_names()))
        if missing:
            raise ValueError(f"tool {missing[0]} has no input/output contract pair")

    def spec(self, name: str) -> ToolSpec | None:
        """The spec of the tool ``name`` (its module imported now if it was not), or None."""
        spec = self._specs.get(name)
        if spec is None and name in self.names:
            # The import lock makes a race import once; both then read the same SPEC.
            spec = self._specs.setdefault(name, load_tools((name,))[name])
        return spec


def to_json(value: Any) -> str:
    """The wire text of a result: compact, raw UTF-8, and no NaN (it is not JSON)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


class Dispatcher:
    """Runs tools: contracts, bundle allow-list, snapshot cache, budgets (the module docstring)."""

    def __init__(
        self,
        config: ServeConfig,
        contracts: ContractSet | None = None,
        *,
        tools: Mapping[str, ToolSpec] | None = None,
        cache: SnapshotCache | None = None,
        semantic: SemanticIndex | None = None,
        remotes: RemoteMounts | None = None,
    ) -> None:
        self.config = config
        # The remote bundles (git URLs, archives) among config.bundles: served read-only from
        # the cache, each load made while its copy is held in place (remote/mounts.py).
        self._remotes = remotes
        self.contracts = contracts if contracts is not None else ContractSet(caps=config.caps)
        unknown = sorted((config.toolsets or frozenset()) - set(TOOLSETS))
        if unknown:
            raise ValueError(f"unknown toolset(s): {', '.join(unknown)}")
        # An index whose model is not installed could only refuse every search, so its tools
        # are not offered at all: nobody pays for their descriptions. No index (the Python API,
        # tests) keeps them: they still answer calls that bring seed_ids.
        self._can_embed = semantic is None or semantic.installed()
        if not self._can_embed and SEMANTIC_TOOLSET in (config.toolsets or ()):
            raise ValueError(f"toolset {SEMANTIC_TOOLSET!r} needs the semantic extra, "
                             "which is not installed")
        # The tools, each module imported when first asked for (_Registry): a restarted
        # server's first call imports its own tool only.
        self._registry = _Registry(tools, self.contracts)
        # Name → the served tool (None: not served), decided when first asked for.
        self._decided: dict[str, _Tool | None] = {}
        self._cache = cache if cache is not None else SnapshotCache(caps=config.caps)
        # The settings that shape a kept answer, in its stored key (stored_answers.answer_key).
        self._answer_settings = canonical_json([
            config.skip_unparseable, config.read_only, sorted(config.toolsets or ()),
            repr(config.caps), semantic is not None])
        # The reader of calls that name none; replaced (one reference, atomically) when stdio's
        # readers file is reloaded.
        self._reader = config.reader
        # The embedding index is a server-level service (a worker thread and its vectors); every
        # call's context carries it. None means "semantic search is off".
        self._semantic = semantic
        self._reported_lock = threading.Lock()
        # Told of every new snapshot a call captures (the warm-up follows the bundles with it).
        self._capture_listeners: list[Callable[[str, Snapshot], None]] = []
        self._last_capture: dict[str, Snapshot] = {}
        self._capture_lock = threading.Lock()
        # (what, bundle path) → the revision whose broken files or stuck write were logged
        self._reported: dict[tuple[str, str], str] = {}
        # Callers' calls running now (the warm-up's are not counted): the warm-up waits for
        # none to be running before each of its steps.
        self.gate = CallGate()

    def use_reader(self, reader: Reader) -> None:
        """Make ``reader`` the reader of every later call that names none (stdio)."""
        self._reader = reader

    @property
    def reader(self) -> Reader:
        """The reader of calls that name none."""
        return self._reader

    def reserve_views(self, views: int) -> None:
        """Tell the services that keep state per snapshot (the embedding index) how many views
        are served at once (bundles times reader scopes), so they keep one for each."""
        if self._semantic is not None:
            self._semantic.reserve(views)

    def on_capture(self, listener: Callable[[str, Snapshot], None]) -> None:
        """Call ``listener(bundle_path, snapshot)`` whenever a call sees a bundle's snapshot
        change. It runs in the calling thread, so it must only take note and return."""
        with self._capture_lock:
            self._capture_listeners.append(listener)

    def _snapshot(self, bundle_path: str, token: CancelToken) -> Snapshot:
        return self._capture(bundle_path, token)[0]

    def _capture(
        self, bundle_path: str, token: CancelToken
    ) -> tuple[Snapshot, BundleSource | None]:
        """The bundle's current snapshot and, for a remote bundle, the source it was loaded
        from (read while the copy is held, so the two always belong together)."""
        if self._remotes is None:
            snapshot, source = self._cache.get(bundle_path, token), None
        else:
            with self._remotes.holding(bundle_path):
                snapshot = self._cache.get(bundle_path, token)
                source = self._remotes.source(bundle_path)
        if bundle_path not in self.config.bundles:
            return snapshot, source  # only the bundles named at start-up are followed
        with self._capture_lock:
            new = self._last_capture.get(bundle_path) is not snapshot
            if new:
                self._last_capture[bundle_path] = snapshot
            listeners = tuple(self._capture_listeners) if new else ()
        for listener in listeners:
            listener(bundle_path, snapshot)
        return snapshot, source

    def _view(self, bundle_path: str, token: CancelToken, reader: Reader | None) -> Snapshot:
        """The reader's view of the bundle's current snapshot (the configured reader's when
        ``None``): the bundle as it would load with every file the reader may not read deleted.
        Everything a call or a surface computes sees only this."""
        return self._view_and_source(bundle_path, token, reader)[0]

    def _view_and_source(
        self, bundle_path: str, token: CancelToken, reader: Reader | None
    ) -> tuple[Snapshot, BundleSource | None]:
        reader = reader if reader is not None else self._reader
        if reader is not ALL_READER and self.config.scopes_problem() is not None:
            # `serve` refuses this configuration at start; this holds the rule for every other
            # way a dispatcher is built (REST, MCP, stdio and resources all come through here).
            raise BundleError(
                OPERATION_REJECTED,
                "this server cannot keep to reader scopes: it accepts any bundle_path, or "
                "serves one bundle inside another",
                (recovery_step("the operator serves the bundles as BUNDLE arguments, none "
                               "inside another, without --allow-any-bundle"),),
            )
        snapshot, source = self._capture(bundle_path, token)
        return reader_view(snapshot, reader.access.read), source

    def save_parse_cache(self, bundle_path: str, snapshot: Snapshot) -> None:
        """Save what ``snapshot`` has parsed to the persistent cache now, in this thread, when
        the save would gain enough (the warm-up's last step), rather than after the next call."""
        self._cache.persist(bundle_path, snapshot, now=True)

    def tools(self) -> list[ServedTool]:
        """The served tools, sorted by name (the selected toolsets, less writes when read-only,
        less search_semantic when the semantic extra is not installed)."""
        return [tool.served for tool in self._served()]

    def tool_names(self) -> tuple[str, ...]:
        """The served tools' names, sorted (:meth:`tools` without making what they
        advertise)."""
        return tuple(tool.name for tool in self._served())

    def is_read_only_tool(self, name: str) -> bool:
        """Whether ``name`` is a served tool that writes nothing; only that tool's module is
        imported to tell (the first call's path asks this)."""
        tool = self._tool(name)
        return tool is not None and tool.spec.read_only

    def all_read_only(self) -> bool:
        """Whether every served tool writes nothing (``--read-only``, or no write tool)."""
        return all(tool.spec.read_only for tool in self._served())

    def needs_extra(self, name: str) -> bool:
        """Whether ``name`` is left out only because the semantic extra is not installed."""
        spec = self._registry.spec(name)
        return (spec is not None and not self._can_embed and spec.toolset == SEMANTIC_TOOLSET
                and _selected(spec, self.config))

    def _tool(self, name: str) -> _Tool | None:
        """The served tool ``name``, or None when no tool of that name is served."""
        try:
            return self._decided[name]
        except KeyError:
            pass
        spec = self._registry.spec(name)
        if spec is None:
            return None  # not kept: a client can send any number of names
        served = _selected(spec, self.config) and not self.needs_extra(name)
        # A race decides twice, the same way; one of the two equal values is kept.
        return self._decided.setdefault(
            name, _Tool(name, spec, self.contracts) if served else None)

    def _served(self) -> list[_Tool]:
        """Every served tool, sorted by name (every tool's module imported)."""
        tools = (self._tool(name) for name in self._registry.names)
        return [tool for tool in tools if tool is not None]

    def call(
        self,
        name: str,
        arguments: Mapping[str, Any] | None,
        token: CancelToken | None = None,
        reader: Reader | None = None,
        *,
        logged: bool = True,
    ) -> Outcome:
        """Run one tool call to completion for ``reader`` (the configured one when ``None``);
        never raises except :class:`UnknownTool`. ``logged=False``: a call no reader made (the
        warm-up's), which leaves no "called by reader" line and does not hold the warm-up back
        (:meth:`wait_until_quiet`)."""
        tool = self._tool(name)
        if tool is None:
            raise UnknownTool(name)
        token = token if token is not None else CancelToken()
        reader = reader if reader is not None else self._reader
        if logged and reader is not ALL_READER:
            # Name only: a token never reaches a log line.
            calls_log.info("%s called by reader %s", name, reader.name)
        if not logged:
            return self._guarded(tool, name, arguments, token, reader)
        with self.gate.call():
            return self._guarded(tool, name, arguments, token, reader)

    def _guarded(
        self, tool: _Tool, name: str, arguments: Mapping[str, Any] | None, token: CancelToken,
        reader: Reader,
    ) -> Outcome:
        try:
            return self._run(tool, {} if arguments is None else arguments, token, reader)
        except BundleError as exc:
            return self._failure(exc)
        except Exception:
            log.exception("tool %s failed with an unexpected exception", name)
            return self._failure(internal_error())

    def wait_until_quiet(self, seconds: float | None) -> bool:
        """Wait until no caller's call is running, at most ``seconds``; True when none is
        (:class:`CallGate`)."""
        return self.gate.wait_quiet(seconds)

    def kept_answer_tools(self) -> tuple[str, ...]:
        """The served tools that keep their finished answers (``ToolSpec.cache_results``), by
        name: the warm-up builds the :data:`ANSWERS` of their default calls."""
        return tuple(tool.name for tool in self._served() if tool.spec.cache_results)

    # -- the pipeline

    def _run(self, tool: _Tool, arguments: Any, token: CancelToken, reader: Reader) -> Outcome:
        spec = tool.spec
        name = spec.name
        token.check()
        self.contracts.check_input(name, arguments)
        token.check()
        bundle_path = self._resolve_bundle(arguments.get("bundle_path"))
        for attempt in range(1, MOVED_ATTEMPTS + 1):
            try:
                return self._run_on(tool, arguments, bundle_path, token, reader)
            except FileMoved as moved:
                # A file the capture trusted changed before its document was built: capture
                # again, reading that file, and answer from the new snapshot.
                self._cache.distrust(bundle_path, moved.path)
                if attempt == MOVED_ATTEMPTS:
                    raise
        raise AssertionError("unreachable")  # the loop returns or raises

    def _run_on(
        self, tool: _Tool, arguments: Any, bundle_path: str, token: CancelToken, reader: Reader
    ) -> Outcome:
        spec = tool.spec
        # Everything below (parse policy, answers, caches) sees only the reader's view.
        snapshot, source = self._view_and_source(bundle_path, token, reader)
        token.check()
        if source is not None and not spec.read_only:
            # A remote bundle is a copy the next refresh replaces: never written.
            raise read_only_rejection()
        self._report_pending(bundle_path, snapshot, token)
        if snapshot.broken and spec.needs_parseable:
            if not self.config.skip_unparseable:
                raise _parse_rejection(snapshot.broken)
            self._report_skipped(bundle_path, snapshot, token)
        params = {k: v for k, v in arguments.items() if k != "bundle_path"}
        call = CallContext(snapshot, token, bundle_path, self._semantic, reader.access,
                           self.config.caps, source, self._cache.parts(bundle_path))
        try:
            outcome = self._outcome(spec, call, params, source, reader)
        except BundleError:
            # What a refused call parsed is saved as any call's: finding out that a bundle
            # passes a cap can mean building documents until it is passed.
            self._cache.persist(bundle_path, snapshot)
            raise
        self._cache.persist(bundle_path, snapshot)
        return outcome

    def _outcome(self, spec: ToolSpec, call: CallContext, params: dict[str, Any],
                 source: BundleSource | None, reader: Reader) -> Outcome:
        """The call's answer: the tool run, or its kept answer (``ToolSpec.cache_results``)."""
        name, snapshot, token = spec.name, call.snapshot, call.token
        if spec.cache_results:
            answers = of_snapshot(snapshot, ANSWERS, lambda: Memo(MAX_KEPT_ANSWERS))
            # A remote bundle's next commit may hold the same files (the same snapshot): its
            # answers are kept per source too.
            key: tuple[object, ...] = (name, canonical_json(params))
            # Stored for the next process only when the answer is the whole bundle's.
            store = call.parts if source is None and reader.access.read.everything else None
            kept: Outcome | _Refused = answers.get(
                key if source is None else (*key, source),
                lambda: self._stored_or_kept_answer(spec, call, params, store),
                token.check,
            )
            if isinstance(kept, _Refused):
                raise kept.error()
            return kept
        return self._answer(spec, call, params)

    def _answer(self, spec: ToolSpec, call: CallContext, params: dict[str, Any]) -> Outcome:
        result = spec.run(call, params)
        if spec.read_only:
            # A write that has committed is reported as done, never as cancelled.
            call.token.check()
        return self._finished(spec, call.snapshot, result)

    def _finished(self, spec: ToolSpec, snapshot: Snapshot, result: dict[str, Any]) -> Outcome:
        structured_text = to_json(result)
        _check_budget(structured_text, spec.output_budget, "structured result")
        text = structured_text if spec.text is None else spec.text(result, snapshot)
        _check_budget(text, TEXT_BUDGET, "text block")
        self.contracts.check_output(spec.name, result)
        return Outcome(structured=result, text=text, is_error=False)

    def _stored_or_kept_answer(
        self, spec: ToolSpec, call: CallContext, params: dict[str, Any],
        store: PartStore | None,
    ) -> Outcome | _Refused:
        """The answer an earlier process stored for this snapshot and these arguments
        (:mod:`.stored_answers`), or its refusal (over its budget); else :meth:`_kept_answer`,
        stored for the next one when its encoding is kept compressed (the text block is the
        result's JSON) or it is a refusal."""
        if store is None:
            return self._kept_answer(spec, call, params)
        snapshot = call.snapshot
        key = stored_answers.answer_key(snapshot, spec.name, canonical_json(params),
                                        self._answer_settings)
        data = store.read(snapshot.revision, key)
        if data is not None:
            found = stored_answers.unpacked(data)
            if found is not None:
                encoding, quoted_size = found
                return Outcome(None, None, False,
                               WireJson(encoding, JsonStringPieces(encoding, quoted_size)))
            refused = stored_answers.unpacked_refusal(data)
            if refused is not None and refused.code == RESOURCE_LIMIT:
                return _Refused.of(refused)
        kept = self._kept_answer(spec, call, params)
        if isinstance(kept, _Refused):
            store.keep(snapshot.revision, key, stored_answers.packed_refusal(kept.error()))
        elif kept.wire is not None and isinstance(
                kept.wire.structured, PackedBytes) and kept.is_text_encoding:
            store.keep(snapshot.revision, key, stored_answers.packed(kept.wire.structured,
                                                                     kept.wire.text.size))
        return kept

    def _kept_answer(
        self, spec: ToolSpec, call: CallContext, params: dict[str, Any]
    ) -> Outcome | _Refused:
        """:meth:`_answer`, encoded to be kept (:func:`_with_wire`). When the text block is the
        result's JSON, the result is encoded a part at a time and compressed as it goes
        (:func:`_packed_encoding`): the whole JSON is never held, as a string or as bytes.
        Made whole, it was the highest point of an edit's follow-up warm-up (38 MiB over the
        kept structures for get_semantic_graph at 10,000 concepts: the text, the encoding and
        the encoder's growing buffer).

        An answer over its budget is kept as that refusal (:class:`_Refused`): the snapshot
        and the arguments decide it as they decide the answer, and finding it out meant
        making and encoding the whole answer at every call (about 2 s for get_semantic_graph
        at 50,000 concepts)."""
        result = spec.run(call, params)
        call.token.check()  # a tool that keeps its answers only reads (ToolSpec)
        packed = _packed_encoding(result) if spec.text is None else None
        if packed is None:
            try:
                return _with_wire(self._finished(spec, call.snapshot, result))
            except BundleError as refused:
                # _finished refuses with resource_limit only for a budget (the output
                # contract's refusal is an internal error, not kept).
                if refused.code != RESOURCE_LIMIT:
                    raise
                return _Refused.of(refused)
        encoding, quoted = packed
        for budget, what in ((spec.output_budget, "structured result"),
                             (TEXT_BUDGET, "text block")):
            # _check_budget's test on the text, whose UTF-8 bytes these are.
            if encoding.size > budget:
                return _Refused.of(_over_budget(what, budget))
        self.contracts.check_output(spec.name, result)
        return Outcome(result, None, False, WireJson(encoding, quoted))

    def _resolve_bundle(self, value: str | None) -> str:
        bundles = self.config.bundles
        if value is None:
            if len(bundles) == 1:
                return bundles[0]
            raise invalid_request(
                "bundle_path is required: this server does not serve exactly one bundle",
                _bundle_diagnostic("give the absolute path of the bundle root"),
            )
        check_bundle_path(value)
        if not self.config.allow_any_bundle and value not in bundles:
            raise invalid_request(
                "bundle_path is not one of the bundles this server serves",
                _bundle_diagnostic(
                    "use a bundle the server was started with; the server's own configuration "
                    "decides which bundles may be read"
                ),
            )
        return value

    def _report_skipped(self, bundle_path: str, snapshot: Snapshot, token: CancelToken) -> None:
        files = ", ".join(d.path for d in snapshot.broken)
        # The client hears it through the call's observer, which tells each connection once.
        token.notify(Notice(
            "warning",
            f"serving without {len(snapshot.broken)} unparseable file(s): {files}",
            bundle_path,
            ("skipped", bundle_path, snapshot.revision),
        ))
        # Once per revision, not per call: a busy client would otherwise flood the log.
        if self._first_report("skipped", bundle_path, snapshot.revision):
            log.warning(
                "serving %s without %d unparseable file(s): %s",
                bundle_path,
                len(snapshot.broken),
                files,
            )

    def _report_pending(self, bundle_path: str, snapshot: Snapshot, token: CancelToken) -> None:
        """A write journal that could be neither finished nor undone (writes are refused)."""
        for diagnostic in snapshot.skipped:
            if diagnostic.code != PENDING_WRITE:
                continue
            token.notify(Notice(
                "error",
                diagnostic.message,
                bundle_path,
                ("pending", bundle_path, snapshot.revision, diagnostic.message),
            ))
            if self._first_report("pending", bundle_path, snapshot.revision):
                log.error("%s: %s", bundle_path, diagnostic.message)

    def _first_report(self, what: str, bundle_path: str, revision: str) -> bool:
        with self._reported_lock:
            if self._reported.get((what, bundle_path)) == revision:
                return False
            self._reported[(what, bundle_path)] = revision
            return True

    # -- for the other MCP surfaces (resources, prompts, completions)

    def served_snapshot(
        self, bundle_path: str, token: CancelToken, reader: Reader | None = None
    ) -> Snapshot:
        """A bundle's snapshot as a read tool sees it: the allow-list, the snapshot cache (pinned,
        no-symlink loader) and the parse policy (strict, or ``--skip-unparseable``).

        Raises:
            BundleError: as the tools would report it (bad or unlisted path, caps, parse errors,
                cancellation).
        """
        resolved = self._resolve_bundle(bundle_path)
        snapshot = self._view(resolved, token, reader)
        token.check()
        self._report_pending(resolved, snapshot, token)
        if snapshot.broken:
            if not self.config.skip_unparseable:
                raise _parse_rejection(snapshot.broken)
            self._report_skipped(resolved, snapshot, token)
        return snapshot

    def refreshed_snapshot(
        self, bundle_path: str, token: CancelToken, reader: Reader | None = None
    ) -> Snapshot | None:
        """The current capture of a bundle that was loaded before, else ``None`` (a change poll
        never starts a cold load). No parse policy: a change is a change even in a broken bundle.

        Raises:
            BundleError: from the loader (the root vanished, a cap is now exceeded).
        """
        if not self._cache.loaded(bundle_path):
            return None
        snapshot = self._view(bundle_path, token, reader)
        self._report_pending(bundle_path, snapshot, token)
        return snapshot

    def _failure(self, error: BundleError) -> Outcome:
        envelope = error.envelope()
        try:
            self.contracts.check_envelope(envelope)
        except BundleError as broken:
            # check_envelope already logged why; send the fixed, known-good envelope instead.
            envelope = broken.envelope()
        return Outcome(structured=envelope, text=envelope["message"], is_error=True)

def _selected(spec: ToolSpec, config: ServeConfig) -> bool:
    if config.read_only and not spec.read_only:
        return False
    return config.toolsets is None or spec.toolset in config.toolsets


def _with_wire(outcome: Outcome) -> Outcome:
    """``outcome`` with its values encoded for the wire, to be kept: a kept answer is large
    (list_concepts, get_semantic_graph) and repeated, so it is encoded once.

    Its text block is most often its result's JSON, the same bytes as the structured encoding
    (``to_json`` and the SDK's encoder agree on every result so far, though not on every float,
    so the bytes are compared, never assumed). Then the text is not kept, and its JSON string
    is made from those bytes. Else both are encoded and kept, as before.

    The structured encoding is kept compressed (:class:`~bundle_mcp.pieces.PackedBytes`: 14.2 →
    2.1 MB for get_semantic_graph at 10,000 concepts), and each write decompresses it a piece at a
    time."""
    try:
        structured = pydantic_json(outcome.structured)
    except PydanticSerializationError:
        return outcome  # encoded by no one: the transport answers -32603 (Outcome.encoded)
    text = outcome.text
    packed = PackedBytes(structured)
    quoted = _json_string_of(structured, packed) if _is_utf8_of(structured, text) else None
    if quoted is not None:
        return Outcome(outcome.structured, None, outcome.is_error, WireJson(packed, quoted))
    try:
        wire = WireJson(packed, Whole(pydantic_json(text)))
    except PydanticSerializationError:
        return outcome
    return Outcome(outcome.structured, text, outcome.is_error, wire)


def _packed_encoding(result: dict[str, Any]) -> tuple[PackedBytes, JsonStringPieces] | None:
    """``result``'s encoding by the SDK's encoder, compressed as it is made, and the text block's
    JSON string made from it, when the text block (``to_json(result)``) is that encoding's
    UTF-8; else None (a float the two spell apart, a value the SDK's encoder refuses, a
    control character), and the caller encodes the whole as before.

    The two encoders write containers alike (compact, keys in order), so the result is encoded
    a part at a time (:func:`_json_parts`: its members, and a list member's items one by one),
    each part by both and compared. A part ``to_json`` refuses raises as ``to_json(result)``
    would; so does a part whose text cannot be UTF-8 (a lone surrogate), as
    :func:`_check_budget` did."""
    if not all(type(key) is str for key in result):
        return None  # to_json writes other keys as strings: not a part of their own
    # What the parts found: quotes and backslashes (what the JSON string adds to the
    # encoding), and whether a part was written apart (the compressing then stops).
    escapes, apart = [0], [False]

    def checked() -> Iterator[bytes]:
        for part in _json_parts(result):
            if type(part) is bytes:
                yield part
                continue
            (value,) = part
            text = to_json(value).encode("utf-8")
            try:
                wire = pydantic_json(value)
            except PydanticSerializationError:
                wire = None
            if wire != text or wire is None or _CONTROL_BYTE.search(wire) is not None:
                apart[0] = True
                return
            escapes[0] += wire.count(b'"') + wire.count(b"\\")
            yield wire

    encoding = PackedBytes(checked())
    if apart[0]:
        return None
    return encoding, JsonStringPieces(encoding, encoding.size + escapes[0] + 2)


def _json_parts(result: dict[str, Any]) -> Iterator[bytes | tuple[Any]]:
    """``result`` as the parts of its JSON: punctuation as bytes, and each value to encode (a
    key, a member, each item of a non-empty list member) in a 1-tuple, in their place."""
    yield b"{"
    for n, (key, value) in enumerate(result.items()):
        if n:
            yield b","
        yield (key,)
        yield b":"
        if type(value) is list and value:
            yield b"["
            for m, item in enumerate(value):
                if m:
                    yield b","
                yield (item,)
            yield b"]"
        else:
            yield (value,)
    yield b"}"


# Compared a piece at a time: a whole encoding would be one more copy of the answer, at the
# moment the answer is held three times already (result, text, encoding).
_COMPARED_CHARS = 1024 * 1024


def _is_utf8_of(data: bytes, text: str) -> bool:
    """Whether ``data`` is ``text`` in UTF-8."""
    if not text.isascii():  # O(1): CPython keeps the flag; then characters are not bytes
        return data == text.encode("utf-8")
    if len(data) != len(text):
        return False
    return all(
        data[start:start + _COMPARED_CHARS] == text[start:start + _COMPARED_CHARS].encode("ascii")
        for start in range(0, len(text), _COMPARED_CHARS)
    )


_CONTROL_BYTE = re.compile(rb"[\x00-\x1f]")


def _json_string_of(data: bytes, source: Pieces) -> JsonStringPieces | None:
    """The UTF-8 text ``data`` as the SDK's encoder writes it as a JSON string, as pieces made
    from ``source`` (``data`` in pieces) when they are written (:class:`JsonStringPieces`).
    None when ``data`` holds a control character, which the encoder writes its own way.

    ``pydantic_core`` writes strings with serde_json, which escapes exactly '"', '\\' and the
    control characters U+0000-U+001F, and writes every other character as its UTF-8 bytes
    (``tests/test_answer_lines.py`` holds it to that). ``pydantic_core`` itself raised RSS by
    27 MiB to write get_semantic_graph's 15.8 MB (it grows its buffer as it writes, then copies
    it out).
    """
    if _CONTROL_BYTE.search(data) is not None:
        return None
    escaped = data.count(b'"') + data.count(b"\\")
    return JsonStringPieces(source, len(data) + escaped + 2)


def _bundle_diagnostic(message: str) -> Diagnostic:
    return Diagnostic(code="invalid_input", severity=ERROR, field=_BUNDLE_FIELD, message=message)


def _parse_rejection(broken: tuple[Document, ...]) -> BundleError:
    """One ERROR diagnostic per broken file (the first MAX_LISTED_BROKEN by path), under the
    code the worst of them calls for."""
    every = tuple(
        d.parse_error for d in sorted(broken, key=lambda d: d.path) if d.parse_error is not None
    )
    codes = {e.code for e in every}
    errors = every[:MAX_LISTED_BROKEN]
    count = f"{len(every)} file(s) of the bundle cannot be parsed" + (
        f" (the first {MAX_LISTED_BROKEN} by path are listed)" if len(every) > len(errors) else "")
    if RESOURCE_LIMIT in codes:
        return BundleError(
            RESOURCE_LIMIT,
            f"{count}; at least one is over a size cap",
            (*errors, recovery_step("shrink the listed frontmatter blocks below 1 MiB")),
        )
    if codes == {INVALID_YAML_GRAPH}:
        return BundleError(INVALID_YAML_GRAPH, f"{count}: abusive YAML alias structure", errors)
    return BundleError(
        OPERATION_REJECTED,
        count,
        (
            *errors,
            recovery_step(
                "fix the listed files (validate_bundle reports every problem), or ask the "
                "operator to serve the bundle with --skip-unparseable"
            ),
        ),
    )


def _check_budget(text: str, budget: int, what: str) -> None:
    # Encoding is also the last guard against text the transport could not send (a lone
    # surrogate raises here, as an internal error, instead of killing the session later).
    # An ASCII text (CPython knows it without a scan) is as many bytes as characters and holds
    # no surrogate: its encoding, a copy of the whole answer, is not needed to know either.
    if len(text) > budget or (not text.isascii() and len(text.encode("utf-8")) > budget):
        raise _over_budget(what, budget)


def _over_budget(what: str, budget: int) -> BundleError:
    return resource_limit(
        f"the {what} is larger than its {budget}-byte budget",
        "narrow the request: a smaller limit, a more specific query or fewer kinds",
    )
