"""Change notifications from a real ``bundle-mcp serve`` subprocess: over stdio in both protocol
eras, and what stateless HTTP declares. Every wait is bounded."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import mcp.types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp.shared.subscriptions import ResourceUpdated

from bundle_mcp import resources

if TYPE_CHECKING:
    from conftest import BundleFactory

pytestmark = pytest.mark.anyio

WAIT = 10.0  # the server polls about once a second; this leaves room on a busy machine
FILES = {
    "index.md": "# Shop\n\n- [Beans](beans.md)\n",
    "beans.md": "---\ntype: t\ntitle: Beans\n---\n# Beans\n",
    "roast.md": "---\ntype: t\ntitle: Roast\n---\n# Roast\n",
}


@pytest.fixture(autouse=True)
def _no_deprecation_noise() -> Iterator[None]:
    with warnings.catch_warnings():  # resources/subscribe is the 2025 way; we serve it on purpose
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        yield


def serve(bundle: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable, args=["-m", "bundle_mcp.cli", "serve", bundle]
    )


class Inbox:
    """Notifications as they arrive, with a bounded wait for the next one that matches."""

    def __init__(self) -> None:
        self.items: list[Any] = []
        self._changed = anyio.Event()

    async def __call__(self, message: Any) -> None:
        kinds = (types.ResourceUpdatedNotification, types.ResourceListChangedNotification)
        if isinstance(message, kinds):
            self.items.append(message)
            self._changed.set()

    async def wait_for(self, kind: type[Any], uri: str | None = None) -> Any:
        with anyio.fail_after(WAIT):
            while True:
                for item in self.items:
                    if isinstance(item, kind) and (uri is None or item.params.uri == uri):
                        return item
                # No await between the check and the new event: a notification cannot slip in.
                self._changed = anyio.Event()
                await self._changed.wait()


def edit(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")


async def test_2025_subscribers_hear_of_edits_and_everyone_of_new_files(
    tmp_bundle: BundleFactory,
) -> None:
    bundle = tmp_bundle(FILES)
    label = resources.serve_bundles([bundle])[0].label
    beans, roast = f"okf://{label}/beans", f"okf://{label}/roast"
    inbox = Inbox()
    async with Client(serve(bundle), mode="legacy", message_handler=inbox, cache=None) as c:
        assert c.server_capabilities.resources is not None
        assert c.server_capabilities.resources.subscribe is True
        assert c.server_capabilities.resources.list_changed is True
        assert len((await c.list_resources()).resources) == 3
        await c.subscribe_resource(beans)
        # No poll needs to pass first: the poll compares with what list_resources showed
        # (ConnectionState.observe). Change a subscribed and a silent file.
        edit(Path(bundle, "roast.md"), FILES["roast.md"] + "\nEdited, unsubscribed.\n")
        edit(Path(bundle, "beans.md"), FILES["beans.md"] + "\nEdited.\n")
        await inbox.wait_for(types.ResourceUpdatedNotification, beans)
        read = await c.read_resource(beans)
        assert isinstance(read.contents[0], types.TextResourceContents)
        assert read.contents[0].text.endswith("Edited.\n")
        assert not any(isinstance(i, types.ResourceListChangedNotification) for i in inbox.items)
        edit(Path(bundle, "crema.md"), "---\ntype: t\n---\n# Crema\n")
        await inbox.wait_for(types.ResourceListChangedNotification)
        names = [r.name for r in (await c.list_resources()).resources]
        assert "crema" in names
        await c.unsubscribe_resource(beans)
        inbox.items.clear()
        edit(Path(bundle, "beans.md"), FILES["beans.md"] + "\nAgain.\n")
        Path(bundle, "crema.md").unlink()
        await inbox.wait_for(types.ResourceListChangedNotification)
        updated = types.ResourceUpdatedNotification
        uris = {i.params.uri for i in inbox.items if isinstance(i, updated)}
        assert roast not in uris and beans not in uris  # neither is subscribed any more


async def test_2026_listen_streams_carry_updates_and_list_changes(
    tmp_bundle: BundleFactory,
) -> None:
    bundle = tmp_bundle(FILES)
    beans = f"okf://{resources.serve_bundles([bundle])[0].label}/beans"
    async with Client(serve(bundle), cache=None) as c:
        assert c.protocol_version == "2026-07-28"
        await c.list_resources()
        async with c.listen(resources_list_changed=True, resource_subscriptions=[beans]) as sub:
            assert sub.honored.resource_subscriptions == [beans]
            events: list[Any] = []
            edit(Path(bundle, "roast.md"), FILES["roast.md"] + "\nnot subscribed\n")
            edit(Path(bundle, "beans.md"), FILES["beans.md"] + "\nEdited.\n")
            with anyio.fail_after(WAIT):
                async for event in sub:
                    events.append(event)
                    break
            edit(Path(bundle, "crema.md"), "---\ntype: t\n---\n")
            with anyio.fail_after(WAIT):
                async for event in sub:
                    events.append(event)
                    break
        assert [type(e).__name__ for e in events] == ["ResourceUpdated", "ResourcesListChanged"]
        assert events[0].uri == beans


async def test_setlevel_filters_log_messages_over_stdio(tmp_bundle: BundleFactory) -> None:
    bundle = tmp_bundle({**FILES, "bad.md": "---\n: [\n---\n"})
    got: list[types.LoggingMessageNotificationParams] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        got.append(params)

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "bundle_mcp.cli", "serve", bundle, "--skip-unparseable"],
    )
    with anyio.fail_after(30):
        async with Client(params, mode="legacy", logging_callback=on_log, cache=None) as c:
            await c.set_logging_level("error")
            await c.call_tool("list_concepts", {})
            assert got == []
            await c.set_logging_level("warning")
            await c.read_resource(f"okf://{resources.serve_bundles([bundle])[0].label}/beans")
    assert [m.level for m in got] == ["warning"] and "bad.md" in got[0].data


# --------------------------------------------------------------------------------------------
# Stateless HTTP: no stream outlives a 2025 request, so nothing of the kind is declared


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def http_url(tmp_bundle: BundleFactory) -> Iterator[tuple[str, str]]:
    bundle = tmp_bundle(FILES)
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "bundle_mcp.cli", "serve", bundle, "--http", f"127.0.0.1:{port}"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    break
            except OSError:
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp", bundle
    finally:
        process.terminate()
        process.wait(10)


async def test_stateless_http_declares_only_what_it_can_deliver(
    http_url: tuple[str, str],
) -> None:
    url, bundle = http_url
    beans = f"okf://{resources.serve_bundles([bundle])[0].label}/beans"
    with anyio.fail_after(30):
        async with Client(url, mode="legacy", cache=None) as c:
            caps = c.server_capabilities
            assert caps.resources is not None
            assert (caps.resources.subscribe, caps.resources.list_changed) == (False, False)
            assert caps.logging is None  # JSON responses carry no notifications
            assert caps.prompts is not None and caps.completions is not None
            read = await c.read_resource(beans)
            assert isinstance(read.contents[0], types.TextResourceContents)
            assert read.contents[0].text == FILES["beans.md"]
        async with Client(url, cache=None) as c:  # 2026-07-28: a listen request is a stream
            caps = c.server_capabilities
            assert caps.resources is not None and caps.resources.subscribe is True
            await c.list_resources()
            async with c.listen(resource_subscriptions=[beans]) as sub:
                edit(Path(bundle, "beans.md"), FILES["beans.md"] + "\nover HTTP\n")
                with anyio.fail_after(WAIT):
                    async for event in sub:
                        assert event == ResourceUpdated(uri=beans)
                        break

