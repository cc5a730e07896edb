"""MCP wiring for what hosts show people: resources, prompts, completions, logging and progress.

The decisions live in the transport-free modules (:mod:`~bundle_mcp.resources`,
:mod:`~bundle_mcp.prompts`, :mod:`~bundle_mcp.completion`); this module adapts them to the SDK's
low-level server and adds the parts that need the event loop:

- reads go through :meth:`Dispatcher.served_snapshot` in a worker thread (the same allow-list,
  snapshot cache, pinned no-symlink loader and parse policy as the tools);
- a change poll in the lifespan's task group asks the snapshot cache for the current capture of
  every bundle already loaded (about once a second, only while someone can be told) and sends
  ``notifications/resources/updated`` and ``…/list_changed``: on 2025 connections to the
  connection itself (subscribed URIs only for ``updated``), on 2026-07-28 connections through
  ``subscriptions/listen`` streams;
- the worker's progress and notices (:mod:`~bundle_mcp.observe`) come back to the loop through a
  memory stream (``anyio.from_thread``) and go out as ``notifications/progress`` and
  ``notifications/message`` on the request's own stream.

The lifespan is entered once per connection on stdio and in memory, and once per process over
HTTP, so its :class:`ConnectionState` is per connection where connections last (``streams``) and
the stateless HTTP server registers no per-connection surface (subscribe, setLevel).
"""

from __future__ import annotations

import functools
import logging
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

import anyio
import anyio.from_thread
import anyio.to_thread
import mcp.types as types
from anyio.streams.memory import MemoryObjectSendStream
from mcp import MCPError
from mcp.server import NotificationOptions, Server, ServerRequestContext
from mcp.server.context import CallNext, HandlerResult
from mcp.server.models import InitializationOptions
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    ListenHandler,
    ResourcesListChanged,
    ResourceUpdated,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from . import completion, prompts, resources
from .cancel import CancelToken
from .dispatch import Dispatcher
from .errors import CONCEPT_NOT_FOUND, INVALID_REQUEST, BundleError
from .model import Snapshot
from .observe import (
    DEFAULT_LOG_LEVEL,
    LEVELS,
    LOGGER_NAME,
    CallObserver,
    Notice,
    level_at_least,
    notice_text,
)
from .readers import Reader, reader_in
from .resources import Catalog, ResourceEntry, ServedBundle

__all__ = [
    "DEFAULT_LOG_LEVEL",
    "DEFAULT_POLL_SECONDS",
    "ConnectionState",
    "SurfaceServer",
    "Surfaces",
]

log = logging.getLogger(__name__)

DEFAULT_POLL_SECONDS = 1.0
# A poll that takes long (no inotify: a stat walk per poll) spaces the next ones out, so the
# poll never costs more than about a twentieth of a core.
POLL_BACKOFF = 20.0
PROGRESS_TOTAL = 100.0
_LOAD_SHARE = 90.0  # loading a bundle maps onto 0..90 of the 100
_PROGRESS_INTERVAL = 0.1  # seconds between two intermediate progress reports of a call
_EVENT_BUFFER = 256
_SEEN_CAP = 4096

T = TypeVar("T")
Context = ServerRequestContext[Any]


@dataclass(frozen=True, slots=True)
class _Progress:
    done: int
    total: int


_Event = _Progress | Notice


class _ThreadObserver:
    """The worker side of the bridge: puts reports on the loop's memory stream, never blocks
    on a full one (progress is advisory; a notice also reaches the server log)."""

    def __init__(self, send: MemoryObjectSendStream[_Event]) -> None:
        self._send = send
        self._last_progress = 0.0

    def progress(self, done: int, total: int) -> None:
        now = time.monotonic()
        if done <= 0 or now - self._last_progress < _PROGRESS_INTERVAL:
            return  # nothing done yet (the start is reported already), or too soon
        self._last_progress = now
        self._put(_Progress(done, total))

    def notice(self, notice: Notice) -> None:
        self._put(notice)

    def _put(self, event: _Event) -> None:
        try:
            anyio.from_thread.run_sync(self._send.send_nowait, event)
        except (anyio.WouldBlock, anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass  # the call ended (an abandoned worker) or the client reads too slowly
        except RuntimeError:
            pass  # not an anyio worker thread, or the loop is gone


@dataclass(eq=False)
class ConnectionState:
    """What one lifespan (a connection on stdio and in memory; the process over HTTP) knows."""

    streams: bool
    bus: InMemorySubscriptionBus = field(default_factory=InMemorySubscriptionBus)
    listen: ListenHandler = field(init=False)
    listeners: int = 0
    log_level: str = DEFAULT_LOG_LEVEL  # logging/setLevel, 2025 connections only
    # The session of the last 2025-era request on this connection: its connection's own channel
    # carries what the poll announces. None on 2026-07-28 connections and over HTTP.
    session: Any = None
    subscriptions: set[str] = field(default_factory=set)
    seen: set[tuple[str, ...]] = field(default_factory=set)  # notice keys already sent
    baselines: dict[str, Mapping[str, str]] = field(default_factory=dict)  # path → uri → sha
    # The capture each bundle's last poll saw: the same object again means nothing changed.
    # Without a baseline yet, its resources are the baseline (worked out when one differs).
    polled: dict[str, Snapshot] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.listen = ListenHandler(self.bus)

    @property
    def has_audience(self) -> bool:
        return self.session is not None or self.listeners > 0

    def first_time(self, key: tuple[str, ...] | None) -> bool:
        if key is None:
            return True
        if key in self.seen:
            return False
        if len(self.seen) >= _SEEN_CAP:
            self.seen.clear()
        self.seen.add(key)
        return True

    def observe(self, path: str, entries: tuple[ResourceEntry, ...]) -> None:
        """What a client was shown: the first baseline the change poll compares with."""
        self.baselines.setdefault(path, resources.resource_state(entries))


class SurfaceServer(Server[Any]):
    """The SDK server, with the ``listChanged`` flag of resources set where it is true.

    The SDK builds the 2025 ``initialize`` capabilities from ``create_initialization_options``
    and the stdio runner, the in-memory transport and the HTTP manager all call it without
    arguments; here the default says what this server does.
    """

    resources_list_changed: bool = False

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        if notification_options is None:
            notification_options = NotificationOptions(
                resources_changed=self.resources_list_changed
            )
        return super().create_initialization_options(
            notification_options, experimental_capabilities, extensions
        )


class Surfaces:
    """Resources, prompts, completions, logging and progress for one server's dispatcher.

    ``streams``: connections last (stdio, in memory), so subscriptions, ``logging/setLevel``
    and connection-wide notifications exist; false for stateless HTTP with JSON responses.
    """

    def __init__(
        self,
        dispatcher: Dispatcher,
        *,
        page_size: int = resources.DEFAULT_PAGE_SIZE,
        poll_seconds: float = DEFAULT_POLL_SECONDS,
        streams: bool = True,
        told: frozenset[tuple[str, ...]] = frozenset(),
    ) -> None:
        """``told``: the keys of the notices the connection heard before it was served here
        (a first call answered without the SDK, :mod:`bundle_mcp.first_call`)."""
        self.dispatcher = dispatcher
        self._told = told
        self.catalog = Catalog(
            bundles=resources.serve_bundles(dispatcher.config.bundles),
            page_size=page_size,
            cursor_key=secrets.token_bytes(32),
        )
        self.streams = streams
        self.poll_seconds = poll_seconds
        self._labels = {b.path: b.label for b in self.catalog.bundles}
        self._tools = frozenset(spec.name for spec in dispatcher.tools())
        self._prompts = prompts.served_prompts(self._tools, self.catalog.bundles)

    # -- registration

    def handlers(self) -> dict[str, Any]:
        """The ``Server`` constructor's ``on_*`` arguments for these surfaces."""
        out: dict[str, Any] = {
            "lifespan": self.lifespan,
            "on_list_resources": self.on_list_resources,
            "on_list_resource_templates": self.on_list_resource_templates,
            "on_read_resource": self.on_read_resource,
            "on_subscriptions_listen": self.on_subscriptions_listen,
            "on_list_prompts": self.on_list_prompts,
            "on_get_prompt": self.on_get_prompt,
            "on_completion": self.on_completion,
        }
        if self.streams:
            out["on_subscribe_resource"] = self.on_subscribe_resource
            out["on_unsubscribe_resource"] = self.on_unsubscribe_resource
        return out

    def install(self, server: SurfaceServer) -> None:
        """What the constructor cannot take: the 2025 logging handler and the session tap."""
        server.resources_list_changed = self.streams
        if self.streams:
            # add_request_handler, not on_set_logging_level=: the constructor warns that
            # logging is deprecated at 2026-07-28; 2025 clients still use it, and 2026-07-28
            # requests cannot reach this method at all (the SDK answers -32601).
            server.add_request_handler(
                "logging/setLevel", types.SetLevelRequestParams, self.on_set_logging_level
            )
            server.middleware.append(self._remember_session)

    @asynccontextmanager
    async def lifespan(self, server: Server[Any]) -> AsyncIterator[ConnectionState]:
        state = ConnectionState(streams=self.streams, seen=set(self._told))
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._poll_forever, state)
            try:
                yield state
            finally:
                state.listen.close()
                tg.cancel_scope.cancel()

    async def _remember_session(self, ctx: Context, call_next: CallNext) -> HandlerResult:
        state = _state(ctx)
        if state is not None and ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            state.session = ctx.session
        return await call_next(ctx)

    # -- progress and notices of one request

    @asynccontextmanager
    async def reporting(self, ctx: Context, what: str) -> AsyncIterator[CallObserver | None]:
        """An observer for the worker of this request: progress (when the request carries a
        ``progressToken``) and notices (at the level the client asked for) ride the request's
        own stream. Sends a start before the block and an end after it.

        Without ``streams`` (stateless HTTP) every answer is one JSON body and the SDK has no
        wire for anything else scoped to the request, so it gets no observer (``None``): no
        pump task, no memory stream, nothing sent that would be dropped anyway.
        """
        if not self.streams:
            yield None
            return
        state = _state(ctx)
        threshold = _threshold(ctx, state)
        # A 2025 connection hears a notice once; a 2026-07-28 request that opts in, every time.
        dedupe = ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS
        last = [-1.0]  # progress must grow: a value not above the last one is not sent

        async def progress(value: float, message: str) -> None:
            if value > last[0]:
                last[0] = value
                await ctx.session.report_progress(value, PROGRESS_TOTAL, message)

        async def deliver(event: _Event) -> None:
            if isinstance(event, _Progress):
                share = _LOAD_SHARE * event.done / max(event.total, 1)
                await progress(share, f"loading the bundle: {event.done} of {event.total} files")
            else:
                await self._send_notice(
                    ctx.session, event, threshold, state if dedupe else None, ctx.request_id
                )

        await progress(0.0, f"{what}: started")
        async with self._bridge(deliver) as observer:
            yield observer
        await progress(PROGRESS_TOTAL, f"{what}: done")

    @asynccontextmanager
    async def _bridge(
        self, deliver: Callable[[_Event], Awaitable[None]]
    ) -> AsyncIterator[CallObserver]:
        send, receive = anyio.create_memory_object_stream[_Event](_EVENT_BUFFER)

        async def pump() -> None:
            async with receive:
                async for event in receive:
                    try:
                        await deliver(event)
                    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                        pass  # the client went away; the call itself ends on its own
                    except Exception:  # a side channel: it never fails the request
                        log.exception("a progress or log notification could not be sent")

        failure: Exception | None = None
        async with anyio.create_task_group() as tg:
            tg.start_soon(pump)
            try:
                yield _ThreadObserver(send)
            except Exception as exc:
                # Raised again below, outside the task group: inside it, it would leave wrapped
                # in an ExceptionGroup, and the SDK would no longer see an MCPError.
                failure = exc
            finally:
                send.close()  # the pump drains what the worker sent, then ends
        if failure is not None:
            raise failure

    async def _send_notice(
        self,
        session: Any,
        notice: Notice,
        threshold: str | None,
        state: ConnectionState | None,
        request_id: types.RequestId | None,
    ) -> None:
        """Send one notice at or above ``threshold``; with ``state``, once per connection."""
        if threshold is None or not level_at_least(notice.level, threshold):
            return
        if state is not None and not state.first_time(notice.key):
            return
        params = types.LoggingMessageNotificationParams(
            level=notice.level,  # type: ignore[arg-type]  # one of observe.LEVELS
            logger=LOGGER_NAME,
            data=notice_text(notice, self._labels),
        )
        await session.send_notification(
            types.LoggingMessageNotification(params=params), related_request_id=request_id
        )

    # -- resources

    async def on_list_resources(
        self, ctx: Context, params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        cursor = params.cursor if params is not None else None
        async with self.reporting(ctx, "resources/list") as observer:
            captures = await self._captures(observer, reader_of(ctx))
        state = _state(ctx)
        if state is not None:
            for served, snapshot in captures:
                state.observe(served.path, resources.entries_of(served.label, snapshot))
        try:
            page = self.catalog.page(captures, cursor)
        except resources.CursorError as exc:
            raise MCPError(types.INVALID_PARAMS, str(exc), data={"cursor": cursor}) from None
        return types.ListResourcesResult(
            resources=[_resource(entry) for entry in page.entries], next_cursor=page.next_cursor
        )

    async def _captures(
        self, observer: CallObserver | None, reader: Reader | None
    ) -> list[tuple[ServedBundle, Snapshot]]:
        def load(token: CancelToken) -> list[tuple[ServedBundle, Snapshot]]:
            return [
                (served, self.dispatcher.served_snapshot(served.path, token, reader))
                for served in self.catalog.bundles
            ]

        return await _in_worker(load, observer)

    async def on_list_resource_templates(
        self, ctx: Context, params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(
            resource_templates=[
                types.ResourceTemplate(
                    name=f"{served.label}/concept",
                    title=f"Concept of {served.label}",
                    uri_template=resources.template_uri(served.label),
                    description=(
                        f"One concept of the bundle {served.label} by its concept_id (the path "
                        "without .md); the raw Markdown file. completion/complete offers IDs."
                    ),
                    mime_type=resources.MIME_TYPE,
                )
                for served in self.catalog.bundles
            ]
        )

    async def on_read_resource(
        self, ctx: Context, params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        uri = params.uri
        target, served = self._target(uri)
        reader = reader_of(ctx)
        async with self.reporting(ctx, "resources/read") as observer:
            snapshot = await _in_worker(
                lambda token: self.dispatcher.served_snapshot(served.path, token, reader),
                observer,
            )
        found = resources.find_entry(target, snapshot)
        if found is None:
            raise _not_found(uri, target, served)
        entry, text = found
        state = _state(ctx)
        if state is not None:
            state.observe(served.path, resources.entries_of(served.label, snapshot))
        return types.ReadResourceResult(
            contents=[
                types.TextResourceContents(uri=entry.uri, mime_type=resources.MIME_TYPE, text=text)
            ]
        )

    def _target(self, uri: str) -> tuple[resources.ResourceTarget, ServedBundle]:
        try:
            target = resources.parse_uri(uri)
        except resources.UriError as exc:
            raise MCPError(
                types.INVALID_PARAMS, f"Unknown resource: {exc}", data={"uri": uri[:512]}
            ) from None
        served = self.catalog.bundle(target.label)
        if served is None:
            names = ", ".join(b.label for b in self.catalog.bundles) or "none"
            raise MCPError(
                types.INVALID_PARAMS,
                f"Unknown resource: no served bundle is named {target.label[:128]!r} "
                f"(served: {names})",
                data={"uri": uri[:512]},
            )
        return target, served

    async def on_subscribe_resource(
        self, ctx: Context, params: types.SubscribeRequestParams
    ) -> types.EmptyResult:
        target, served = self._target(params.uri)
        reader = reader_of(ctx)
        async with self.reporting(ctx, "resources/subscribe") as observer:
            snapshot = await _in_worker(
                lambda token: self.dispatcher.served_snapshot(served.path, token, reader),
                observer,
            )
        found = resources.find_entry(target, snapshot)
        if found is None:
            raise _not_found(params.uri, target, served)
        state = _state(ctx)
        if state is not None:
            state.observe(served.path, resources.entries_of(served.label, snapshot))
            state.subscriptions.add(found[0].uri)
            state.session = ctx.session
        return types.EmptyResult()

    async def on_unsubscribe_resource(
        self, ctx: Context, params: types.UnsubscribeRequestParams
    ) -> types.EmptyResult:
        state = _state(ctx)
        if state is not None:
            try:
                target, served = self._target(params.uri)
            except MCPError:
                return types.EmptyResult()  # never subscribed: nothing to undo
            state.subscriptions.discard(
                resources.concept_uri(served.label, target.concept_id)
                if target.concept_id is not None
                else resources.file_uri(served.label, target.path)
            )
        return types.EmptyResult()

    async def on_subscriptions_listen(
        self, ctx: Context, params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        state = _state(ctx)
        if state is None:  # pragma: no cover - the lifespan always provides one
            raise MCPError(types.INTERNAL_ERROR, "no connection state")
        state.listeners += 1
        try:
            return await state.listen(ctx, params)
        finally:
            state.listeners -= 1

    # -- the change poll

    async def _poll_forever(self, state: ConnectionState) -> None:
        interval = self.poll_seconds
        while True:
            await anyio.sleep(interval)
            if not state.has_audience or not self.catalog.bundles:
                continue
            started = time.monotonic()
            try:
                await self._poll_once(state)
            except Exception:  # the poll is a service: log and keep polling
                log.exception("the resource change poll failed")
            interval = max(self.poll_seconds, POLL_BACKOFF * (time.monotonic() - started))

    async def _poll_once(self, state: ConnectionState) -> None:
        async def deliver(event: _Event) -> None:
            if isinstance(event, Notice) and state.session is not None:
                await self._send_notice(state.session, event, state.log_level, state, None)

        for served in self.catalog.bundles:
            refresh = functools.partial(self.dispatcher.refreshed_snapshot, served.path)
            async with self._bridge(deliver) as observer:
                try:
                    snapshot = await _in_worker(refresh, observer, raw=True)
                except BundleError:
                    seen = state.polled.pop(served.path, None)
                    current: Mapping[str, str] = {}  # unreadable now: its resources are gone
                else:
                    if snapshot is None:
                        continue  # never loaded: nothing was shown, nothing to compare
                    seen = state.polled.get(served.path)
                    if seen is snapshot:
                        continue  # the cache kept its capture: nothing changed
                    state.polled[served.path] = snapshot
                    if seen is None and served.path not in state.baselines:
                        # The first capture seen is the baseline, its resources worked out
                        # when a later capture differs: the first poll comes during a cold
                        # start, where building every document's entry competed with the
                        # first call (at 50,000 concepts, 2 s of its wait).
                        continue
                    current = await self._resource_state(served, snapshot)
            previous = state.baselines.get(served.path)
            if previous is None and seen is not None:
                previous = await self._resource_state(served, seen)
            state.baselines[served.path] = current
            if previous is not None:
                await self._announce(state, resources.changes_between(previous, current))

    @staticmethod
    async def _resource_state(served: ServedBundle, snapshot: Snapshot) -> Mapping[str, str]:
        # In a worker: at the file cap the entries take seconds to build, and on the event
        # loop they held every call's answer back that long.
        return await _in_worker(functools.partial(_resource_state, served.label, snapshot), None,
                                raw=True)

    async def _announce(self, state: ConnectionState, changes: resources.Changes) -> None:
        if not changes.updated and not changes.list_changed:
            return
        session = state.session
        if session is not None:
            try:
                for uri in sorted(changes.updated & state.subscriptions):
                    await session.send_resource_updated(uri)
                if changes.list_changed:
                    await session.send_resource_list_changed()
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                state.session = None
        if state.listeners:
            for uri in sorted(changes.updated):
                await state.bus.publish(ResourceUpdated(uri))
            if changes.list_changed:
                await state.bus.publish(ResourcesListChanged())

    # -- prompts

    async def on_list_prompts(
        self, ctx: Context, params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        return types.ListPromptsResult(
            prompts=[
                types.Prompt(
                    name=spec.name,
                    title=spec.title,
                    description=f"{spec.description} Uses {', '.join(spec.required_tools)}.",
                    arguments=[
                        types.PromptArgument(
                            name=arg.name, description=arg.description, required=arg.required
                        )
                        for arg in prompts.arguments_of(spec, self.catalog.bundles)
                    ],
                )
                for spec in self._prompts
            ]
        )

    async def on_get_prompt(
        self, ctx: Context, params: types.GetPromptRequestParams
    ) -> types.GetPromptResult:
        try:
            spec = prompts.find_prompt(params.name, self._prompts)
            request = prompts.validate(spec, params.arguments, self.catalog.bundles)
        except prompts.PromptError as exc:
            raise MCPError(
                types.INVALID_PARAMS, str(exc), data={"prompt": params.name[:128]}
            ) from None
        snapshot = None
        if any(a.completes == prompts.CONCEPT_ID for a in spec.arguments):
            reader = reader_of(ctx)
            async with self.reporting(ctx, "prompts/get") as observer:
                snapshot = await _in_worker(
                    lambda token: self.dispatcher.served_snapshot(
                        request.bundle.path, token, reader),
                    observer,
                )
        try:
            rendered = prompts.render(request, self._tools, snapshot)
        except prompts.PromptError as exc:
            raise MCPError(types.INVALID_PARAMS, str(exc), data={"prompt": spec.name}) from None
        return types.GetPromptResult(
            description=rendered.description,
            messages=[_prompt_message(m) for m in rendered.messages],
        )

    # -- completions

    async def on_completion(
        self, ctx: Context, params: types.CompleteRequestParams
    ) -> types.CompleteResult:
        ref = params.ref
        name = params.argument.name
        typed = params.argument.value
        context = (params.context.arguments if params.context is not None else None) or {}
        if isinstance(ref, types.ResourceTemplateReference):
            served = next(
                (b for b in self.catalog.bundles if resources.template_uri(b.label) == ref.uri),
                None,
            )
            if served is None:
                raise MCPError(
                    types.INVALID_PARAMS,
                    f"Unknown resource template: {ref.uri[:512]}",
                    data={"uri": ref.uri[:512]},
                )
            if name != prompts.CONCEPT_ID:
                return _completion(completion.Completion((), 0, False))
            return _completion(await self._complete_ids(ctx, (served,), typed))
        try:
            spec = prompts.find_prompt(ref.name, self._prompts)
        except prompts.PromptError as exc:
            raise MCPError(
                types.INVALID_PARAMS, str(exc), data={"prompt": ref.name[:128]}
            ) from None
        argument = next(
            (a for a in prompts.arguments_of(spec, self.catalog.bundles) if a.name == name), None
        )
        if argument is None or argument.completes is None:
            return _completion(completion.Completion((), 0, False))
        if argument.completes == prompts.BUNDLE:
            labels = completion.folded_candidates(b.label for b in self.catalog.bundles)
            return _completion(completion.complete(labels, typed))
        chosen = context.get(prompts.BUNDLE)
        bundles = tuple(b for b in self.catalog.bundles if chosen is None or b.label == chosen)
        return _completion(await self._complete_ids(ctx, bundles or self.catalog.bundles, typed))

    async def _complete_ids(
        self, ctx: Context, bundles: tuple[ServedBundle, ...], typed: str
    ) -> completion.Completion:
        reader = reader_of(ctx)
        async with self.reporting(ctx, "completion/complete") as observer:
            captures = await _in_worker(
                lambda token: [
                    self.dispatcher.served_snapshot(b.path, token, reader) for b in bundles
                ],
                observer,
            )
        if len(captures) == 1:
            candidates = completion.concept_candidates(captures[0])
        else:  # several bundles: the union of their IDs
            candidates = completion.folded_candidates(
                concept_id for snapshot in captures for concept_id in snapshot.concepts
            )
        return completion.complete(candidates, typed)

    # -- logging (2025 connections)

    async def on_set_logging_level(
        self, ctx: Context, params: types.SetLevelRequestParams
    ) -> types.EmptyResult:
        state = _state(ctx)
        if state is not None:
            state.log_level = params.level
        return types.EmptyResult()


# --------------------------------------------------------------------------------------------
# Helpers


def reader_of(ctx: Context) -> Reader | None:
    """The reader the HTTP request was authenticated as (set by the bearer middleware in the
    ASGI scope's state), or ``None`` on a connection with no such request: the dispatcher then
    uses its configured reader (stdio's ``--reader``)."""
    scope = getattr(ctx.request, "scope", None)
    return reader_in(scope) if isinstance(scope, Mapping) else None


def _state(ctx: Context) -> ConnectionState | None:
    state = ctx.lifespan_context
    return state if isinstance(state, ConnectionState) else None


def _threshold(ctx: Context, state: ConnectionState | None) -> str | None:
    """The least severe level this request's client wants, or None for no messages."""
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        # 2026-07-28: a per-request opt-in in _meta; absent means no log messages at all.
        requested = (ctx.meta or {}).get(types.LOG_LEVEL_META_KEY)
        return requested if isinstance(requested, str) and requested in LEVELS else None
    if state is None or not state.streams:
        return None  # stateless HTTP answers with JSON: there is no stream to carry them
    return state.log_level


def _resource_state(label: str, snapshot: Snapshot, token: CancelToken) -> Mapping[str, str]:
    return resources.resource_state(resources.entries_of(label, snapshot))


async def _in_worker(
    fn: Callable[[CancelToken], T], observer: CallObserver | None, *, raw: bool = False
) -> T:
    """Run ``fn(token)`` in a worker thread; a cancelled request cancels the token.

    A :class:`BundleError` becomes the protocol error the tools' envelope would carry
    (``-32602`` for a bad request or a missing concept, ``-32603`` otherwise, the envelope as
    ``data``) unless ``raw``; any other exception is a bug, logged, and ``-32603``.
    """
    token = CancelToken(observer=observer)
    try:
        return await anyio.to_thread.run_sync(fn, token, abandon_on_cancel=True)
    except anyio.get_cancelled_exc_class():
        token.cancel()
        raise
    except BundleError as exc:
        if raw:
            raise
        envelope = exc.envelope()
        code = types.INVALID_PARAMS if exc.code in (INVALID_REQUEST, CONCEPT_NOT_FOUND) else (
            types.INTERNAL_ERROR
        )
        raise MCPError(code, envelope["message"], data=envelope) from None
    except Exception:
        log.exception("an MCP surface failed in its worker")
        raise MCPError(types.INTERNAL_ERROR, "Internal error") from None


def _not_found(uri: str, target: resources.ResourceTarget, served: ServedBundle) -> MCPError:
    what = (
        f"no concept {target.concept_id[:256]!r}"
        if target.concept_id is not None
        else f"no file {target.path[:256]!r}"
    )
    return MCPError(
        types.INVALID_PARAMS,
        f"Resource not found: the bundle {served.label} has {what}",
        data={"uri": uri[:512]},
    )


def _resource(entry: ResourceEntry) -> types.Resource:
    return types.Resource(
        uri=entry.uri,
        name=entry.name,
        title=entry.title,
        description=entry.description,
        mime_type=resources.MIME_TYPE,
        size=entry.size,
    )


def _prompt_message(message: prompts.Message) -> types.PromptMessage:
    if message.resource is not None:
        uri, mime, text = message.resource
        return types.PromptMessage(
            role="user",
            content=types.EmbeddedResource(
                type="resource",
                resource=types.TextResourceContents(uri=uri, mime_type=mime, text=text),
            ),
        )
    block = types.TextContent(type="text", text=message.text or "")
    return types.PromptMessage(role="user", content=block)


def _completion(result: completion.Completion) -> types.CompleteResult:
    return types.CompleteResult(
        completion=types.Completion(
            values=list(result.values), total=result.total, has_more=result.has_more
        )
    )
