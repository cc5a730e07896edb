"""Resources, prompts, completions, logging and progress through real SDK client sessions in
memory, in both protocol eras ("auto" negotiates 2026-07-28, "legacy" 2025-11-25 over JSON-RPC)."""

from __future__ import annotations

import os
import threading
import warnings
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import mcp.types as types
import pytest
from mcp import Client, MCPError
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp.shared.uri_template import UriTemplate

from bundle_mcp import resources
from bundle_mcp.dispatch import Dispatcher, ServeConfig
from bundle_mcp.server import build_server

if TYPE_CHECKING:
    from conftest import BundleFactory

pytestmark = pytest.mark.anyio

SHOP = {
    "index.md": "# Shop\r\n\r\n- [Beans](beans.md)\r\n",  # CRLF kept byte for byte
    "log.md": "# Log\n\n## 2026-11-30\n\n- started\n",
    "beans.md": "\ufeff---\ntype: ingredient\ntitle: Beans\ndescription: Green coffee.\n---\n"
    "# Beans\n\nCafé crème, 日本語.\n",
    "roast.md": "---\ntype: process\ntitle: Roast\n---\n# Roast\n\n[beans](beans.md)\n",
    "roast log.md": "---\ntype: record\n---\n# A roast log\n",
    "tables/orders.md": "---\ntype: table\n---\n# Orders\n",
    "tables/index.md": "# Tables\n\n- [Orders](orders.md)\n",
    "hash#name.md": "---\ntype: odd\n---\n# Hash\n",
    "notes.txt": "an asset, never a resource",
}


@pytest.fixture(params=["auto", "legacy"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(autouse=True)
def _no_deprecation_noise() -> Iterator[None]:
    # set_logging_level and subscribe_resource are 2025-era client calls the SDK marks
    # deprecated; the server supports them on purpose.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        yield


@pytest.fixture
def shop(tmp_bundle: BundleFactory) -> str:
    return tmp_bundle(SHOP)


def server_for(*bundles: str, page_size: int = resources.DEFAULT_PAGE_SIZE, **config: Any) -> Any:
    return build_server(Dispatcher(ServeConfig(bundles=bundles, **config)), page_size=page_size)


@pytest.fixture
async def client(shop: str, mode: str) -> AsyncIterator[Client]:
    async with Client(server_for(shop), mode=mode, cache=None) as c:
        yield c


def label_of(path: str) -> str:
    return resources.serve_bundles([path])[0].label


async def invalid_params(call: Any) -> MCPError:
    with pytest.raises(MCPError) as info:
        await call
    assert info.value.error.code == types.INVALID_PARAMS, info.value.error
    return info.value


# --------------------------------------------------------------------------------------------
# Capabilities


async def test_capabilities_declare_resources_prompts_completions_and_logging(
    client: Client, mode: str
) -> None:
    caps = client.server_capabilities
    assert caps.resources is not None and caps.resources.subscribe is True
    assert caps.resources.list_changed is True
    assert caps.prompts is not None and caps.completions is not None
    assert caps.logging is not None
    assert caps.tools is not None


# --------------------------------------------------------------------------------------------
# Resources


async def test_resources_list_pages_with_the_protocol_cursor(shop: str, mode: str) -> None:
    """Contract: each page is at most page_size; the pages together are the listing once."""
    label = label_of(shop)
    async with Client(server_for(shop, page_size=3), mode=mode, cache=None) as c:
        uris: list[str] = []
        cursor = None
        pages = 0
        while True:
            page = await c.list_resources(cursor=cursor)
            assert len(page.resources) <= 3
            uris += [r.uri for r in page.resources]
            pages += 1
            cursor = page.next_cursor
            if cursor is None:
                break
        single = server_for(shop, page_size=1000)
    async with Client(single, mode=mode, cache=None) as c:
        whole = await c.list_resources()
        assert whole.next_cursor is None
    assert uris == [r.uri for r in whole.resources]
    assert pages == 3 and len(uris) == 8
    # In bundle-path order ("roast log.md" < "roast.md"); notes.txt is an asset, not listed.
    assert [r.name for r in whole.resources] == [
        "beans", "hash#name", "index.md", "log.md", "roast log", "roast", "tables/index.md",
        "tables/orders",
    ]
    by_name = {r.name: r for r in whole.resources}
    beans = by_name["beans"]
    assert beans.uri == f"okf://{label}/beans" and beans.mime_type == "text/markdown"
    assert (beans.title, beans.description) == ("Beans", "Green coffee.")
    assert beans.size == len(SHOP["beans.md"].encode("utf-8"))
    assert by_name["roast log"].uri == f"okf://{label}/roast%20log"
    assert by_name["hash#name"].uri == f"okf://{label}/hash%23name"
    assert by_name["tables/index.md"].uri == f"okf://{label}/tables%2Findex.md"
    assert by_name["index.md"].title == "Index"


async def test_a_stale_or_forged_cursor_is_invalid_params(
    tmp_bundle: BundleFactory, mode: str
) -> None:
    bundle = tmp_bundle({f"c{i}.md": "---\ntype: t\n---\n" for i in range(5)})
    async with Client(server_for(bundle, page_size=2), mode=mode, cache=None) as c:
        first = await c.list_resources()
        assert first.next_cursor is not None
        await invalid_params(c.list_resources(cursor="forged"))
        await invalid_params(c.list_resources(cursor=first.next_cursor[:-2] + "AA"))
        Path(bundle, "c9.md").write_text("---\ntype: t\n---\n", encoding="utf-8")
        error = await invalid_params(c.list_resources(cursor=first.next_cursor))
        assert "changed" in error.error.message
        again = await c.list_resources()
        assert [r.name for r in again.resources] == ["c0", "c1"]


async def test_read_returns_the_raw_file_with_its_mime_type(client: Client, shop: str) -> None:
    """The text is the file as decoded from UTF-8: BOM, CRLF and non-ASCII untouched."""
    label = label_of(shop)
    for name, path in (("beans", "beans.md"), ("index.md", "index.md"),
                       ("tables%2Findex.md", "tables/index.md"), ("log.md", "log.md")):
        result = await client.read_resource(f"okf://{label}/{name}")
        [content] = result.contents
        assert isinstance(content, types.TextResourceContents)
        assert content.mime_type == "text/markdown"
        assert content.uri == f"okf://{label}/{name}"
        assert content.text == SHOP[path]
        assert content.text.encode("utf-8") == Path(shop, path).read_bytes()


async def test_the_template_takes_a_concept_id(client: Client, shop: str) -> None:
    [template] = (await client.list_resource_templates()).resource_templates
    assert template.uri_template == f"okf://{label_of(shop)}/{{concept_id}}"
    assert template.mime_type == "text/markdown"
    expand = UriTemplate.parse(template.uri_template).expand
    for concept_id, path in (("tables/orders", "tables/orders.md"), ("roast log", "roast log.md"),
                             ("hash#name", "hash#name.md")):
        result = await client.read_resource(expand({"concept_id": concept_id}))
        [content] = result.contents
        assert isinstance(content, types.TextResourceContents)
        assert content.text == SHOP[path]


@pytest.mark.parametrize(
    "uri",
    [
        "file:///etc/passwd",
        "https://example.invalid/beans",
        "okf://other-bundle/beans",  # not a bundle of this server
        "okf://{label}/nosuch",  # no such concept
        "okf://{label}/..%2F..%2Fetc%2Fpasswd",
        "okf://{label}/%2Fetc%2Fpasswd",
        "okf://{label}/tables/..",
        "okf://{label}/..",
        "okf://{label}/tables%2F..%2F..%2Fsecret",
        "okf://{label}/notes.txt",  # an asset
        "okf://{label}/secret.md",
        "okf://{label}/beans.md",  # the file name is not the concept's URI
        "okf://{label}/nosuch%2Findex.md",
    ],
)
async def test_uris_that_are_not_ours_or_name_nothing_are_invalid_params(
    client: Client, shop: str, uri: str
) -> None:
    error = await invalid_params(client.read_resource(uri.format(label=label_of(shop))))
    assert error.error.message.startswith(("Unknown resource", "Resource not found"))
    assert shop not in error.error.message


async def test_symlinks_and_bundles_off_the_allow_list_are_never_read(
    tmp_bundle: BundleFactory, mode: str, tmp_path: Path
) -> None:
    """Reads go through the pinned no-symlink loader and the allow-list, never open()."""
    secret = tmp_bundle({"private.md": "---\ntype: t\n---\nsecret\n"})
    bundle = tmp_bundle({"a.md": "---\ntype: t\n---\n"})
    os.symlink(os.path.join(secret, "private.md"), os.path.join(bundle, "linked.md"))
    async with Client(server_for(bundle), mode=mode, cache=None) as c:
        names = [r.name for r in (await c.list_resources()).resources]
        assert names == ["a"]
        await invalid_params(c.read_resource(f"okf://{label_of(bundle)}/linked"))
        await invalid_params(c.read_resource(f"okf://{label_of(secret)}/private"))


async def test_several_bundles_are_listed_under_their_names(
    tmp_bundle: BundleFactory, mode: str
) -> None:
    one = tmp_bundle({"a.md": "---\ntype: t\n---\n"})
    two = tmp_bundle({"b.md": "---\ntype: t\n---\n"})
    served = resources.serve_bundles([one, two])
    async with Client(server_for(one, two), mode=mode, cache=None) as c:
        uris = [r.uri for r in (await c.list_resources()).resources]
        expected = {b.path: b.label for b in served}
        assert sorted(uris) == sorted(
            [f"okf://{expected[one]}/a", f"okf://{expected[two]}/b"]
        )
        templates = (await c.list_resource_templates()).resource_templates
        assert len(templates) == 2
        await invalid_params(c.read_resource(f"okf://{expected[one]}/b"))


async def test_a_strict_server_refuses_resources_of_a_broken_bundle(
    tmp_bundle: BundleFactory, mode: str
) -> None:
    """The tools' parse policy holds for resources: strict fails, --skip-unparseable serves."""
    bundle = tmp_bundle({"a.md": "---\ntype: t\n---\n", "bad.md": "---\n: [\n---\n"})
    async with Client(server_for(bundle), mode=mode, cache=None) as c:
        with pytest.raises(MCPError) as info:
            await c.list_resources()
        assert info.value.error.code == types.INTERNAL_ERROR
        assert info.value.error.data["code"] == "operation_rejected"
    async with Client(server_for(bundle, skip_unparseable=True), mode=mode, cache=None) as c:
        assert [r.name for r in (await c.list_resources()).resources] == ["a"]


# --------------------------------------------------------------------------------------------
# Completions


async def test_completion_of_the_template_ranks_prefix_then_substring(
    tmp_bundle: BundleFactory, mode: str
) -> None:
    ids = ["roast", "Roast-log", "beans/roast", "pre-roast", "ROASTER", "beans", "cupping"]
    bundle = tmp_bundle({f"{i}.md": "---\ntype: t\n---\n" for i in ids})
    template = resources.template_uri(label_of(bundle))
    async with Client(server_for(bundle), mode=mode, cache=None) as c:
        result = await c.complete(
            types.ResourceTemplateReference(uri=template),
            {"name": "concept_id", "value": "rOA"},
        )
        # Prefix matches first, then substring matches; each by folded ID, then ID.
        assert result.completion.values == [
            "roast", "Roast-log", "ROASTER", "beans/roast", "pre-roast"
        ]
        assert result.completion.total == 5 and result.completion.has_more is False
        await invalid_params(
            c.complete(
                types.ResourceTemplateReference(uri="okf://nope/{concept_id}"),
                {"name": "concept_id", "value": ""},
            )
        )


async def test_completion_is_capped_at_100_with_total_and_has_more(
    tmp_bundle: BundleFactory, mode: str
) -> None:
    bundle = tmp_bundle({f"doc-{i:03d}.md": "---\ntype: t\n---\n" for i in range(150)})
    async with Client(server_for(bundle), mode=mode, cache=None) as c:
        for ref in (
            types.ResourceTemplateReference(uri=resources.template_uri(label_of(bundle))),
            types.PromptReference(name="explain_concept"),
        ):
            result = await c.complete(ref, {"name": "concept_id", "value": "DOC-"})
            assert len(result.completion.values) == 100
            assert result.completion.values[0] == "doc-000"
            assert result.completion.total == 150 and result.completion.has_more is True
        other = await c.complete(
            types.PromptReference(name="answer_from_bundle"), {"name": "question", "value": "x"}
        )
        assert other.completion.values == []
        await invalid_params(
            c.complete(types.PromptReference(name="nosuch"), {"name": "concept_id", "value": ""})
        )


async def test_prompt_completion_offers_bundles_and_the_chosen_bundles_ids(
    tmp_bundle: BundleFactory, mode: str
) -> None:
    one = tmp_bundle({"apple.md": "---\ntype: t\n---\n"})
    two = tmp_bundle({"apricot.md": "---\ntype: t\n---\n"})
    labels = {b.path: b.label for b in resources.serve_bundles([one, two])}
    async with Client(server_for(one, two), mode=mode, cache=None) as c:
        ref = types.PromptReference(name="explain_concept")
        bundles = await c.complete(ref, {"name": "bundle", "value": ""})
        assert sorted(bundles.completion.values) == sorted(labels.values())
        both = await c.complete(ref, {"name": "concept_id", "value": "ap"})
        assert both.completion.values == ["apple", "apricot"]
        only = await c.complete(
            ref, {"name": "concept_id", "value": "ap"}, context_arguments={"bundle": labels[two]}
        )
        assert only.completion.values == ["apricot"]


# --------------------------------------------------------------------------------------------
# Prompts


def _text(message: types.PromptMessage) -> str:
    assert isinstance(message.content, types.TextContent)
    return message.content.text


async def test_prompts_are_listed_with_their_arguments(client: Client) -> None:
    listed = {p.name: p for p in (await client.list_prompts()).prompts}
    assert sorted(listed) == ["answer_from_bundle", "explain_concept", "review_freshness"]
    args = {name: [(a.name, a.required) for a in p.arguments or []] for name, p in listed.items()}
    assert args == {
        "answer_from_bundle": [("question", True)],
        "explain_concept": [("concept_id", True)],
        "review_freshness": [("as_of", True)],
    }
    assert all(p.title and p.description for p in listed.values())


async def test_answer_prompt_teaches_the_loop_and_citations(client: Client) -> None:
    result = await client.get_prompt("answer_from_bundle", {"question": "How dark is the roast?"})
    [message] = result.messages
    text = _text(message)
    assert message.role == "user"
    assert "How dark is the roast?" in text
    for tool in ("search_concepts", "read_concept", "search_sections", "get_neighbors",
                 "expand_neighbors", "fetch_slice"):
        assert tool in text
    assert "at most twice" in text and "parent_id" in text
    assert "omit bundle_path" in text


async def test_review_prompt_judges_at_the_given_date(client: Client) -> None:
    result = await client.get_prompt("review_freshness", {"as_of": "2026-11-30"})
    text = _text(result.messages[0])
    assert 'as_of "2026-11-30"' in text and "list_concepts" in text and "validate_bundle" in text
    assert "instant-0b87c52" not in text
    instant = await client.get_prompt("review_freshness", {"as_of": "2026-11-30T08:00:00Z"})
    assert 'temporal_profile "instant-0b87c52"' in _text(instant.messages[0])


async def test_explain_prompt_attaches_the_concept_and_names_its_neighbours_tool(
    client: Client, shop: str
) -> None:
    result = await client.get_prompt("explain_concept", {"concept_id": "tables/orders"})
    first, attached = result.messages
    assert "get_neighbors" in _text(first) and '"tables/orders"' in _text(first)
    assert isinstance(attached.content, types.EmbeddedResource)
    resource = attached.content.resource
    assert isinstance(resource, types.TextResourceContents)
    assert resource.uri == f"okf://{label_of(shop)}/tables%2Forders"
    assert resource.text == SHOP["tables/orders.md"] and resource.mime_type == "text/markdown"


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("answer_from_bundle", {}),
        ("answer_from_bundle", {"question": ""}),
        ("answer_from_bundle", {"question": "q", "colour": "blue"}),
        ("explain_concept", {}),
        ("explain_concept", {"concept_id": "nosuch"}),
        ("explain_concept", {"concept_id": "../etc/passwd"}),
        ("review_freshness", {"as_of": "last week"}),
        ("answer_from_bundle", {"question": "q", "bundle": "nope"}),
        ("nosuch", {}),
    ],
)
async def test_bad_prompt_arguments_are_invalid_params(
    client: Client, name: str, arguments: dict[str, str]
) -> None:
    await invalid_params(client.get_prompt(name, arguments))


async def test_prompts_follow_the_served_tools(shop: str, mode: str) -> None:
    """--tools read: no walk tools, so the answer prompt does not suggest them."""
    server = server_for(shop, toolsets=frozenset({"read"}))
    async with Client(server, mode=mode, cache=None) as c:
        text = _text((await c.get_prompt("answer_from_bundle", {"question": "q"})).messages[0])
        assert "get_neighbors" in text and "expand_neighbors" not in text
    async with Client(server_for(shop, toolsets=frozenset({"walk"})), mode=mode) as c:
        assert (await c.list_prompts()).prompts == []


async def test_prompts_of_a_server_with_several_bundles_take_the_bundle(
    tmp_bundle: BundleFactory, mode: str
) -> None:
    one = tmp_bundle({"a.md": "---\ntype: t\n---\n"})
    two = tmp_bundle({"b.md": "---\ntype: t\n---\n"})
    labels = {b.path: b.label for b in resources.serve_bundles([one, two])}
    async with Client(server_for(one, two), mode=mode, cache=None) as c:
        [explain] = [p for p in (await c.list_prompts()).prompts if p.name == "explain_concept"]
        assert [(a.name, a.required) for a in explain.arguments or []] == [
            ("concept_id", True), ("bundle", True)
        ]
        await invalid_params(c.get_prompt("explain_concept", {"concept_id": "b"}))
        await invalid_params(
            c.get_prompt("explain_concept", {"concept_id": "b", "bundle": labels[one]})
        )
        result = await c.get_prompt("explain_concept", {"concept_id": "b", "bundle": labels[two]})
        assert f'bundle_path "{two}"' in _text(result.messages[0])


# --------------------------------------------------------------------------------------------
# Logging and progress


async def test_warnings_reach_the_client_at_the_level_it_set(tmp_bundle: BundleFactory) -> None:
    """2025 era: logging/setLevel filters; each connection hears a warning once per revision."""
    bundle = tmp_bundle({"a.md": "---\ntype: t\n---\n", "bad.md": "---\n: [\n---\n"})
    got: list[types.LoggingMessageNotificationParams] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        got.append(params)

    server = server_for(bundle, skip_unparseable=True)
    async with Client(server, mode="legacy", logging_callback=on_log, cache=None) as c:
        await c.set_logging_level("error")
        assert not (await c.call_tool("list_concepts", {})).is_error
        assert got == []
    async with Client(server, mode="legacy", logging_callback=on_log, cache=None) as c:
        await c.set_logging_level("warning")
        await c.call_tool("list_concepts", {})
        await c.call_tool("list_concepts", {})  # the same revision: not repeated
        assert [(m.level, m.logger) for m in got] == [("warning", "bundle-mcp")]
        assert "bad.md" in got[0].data and label_of(bundle) in got[0].data
        assert bundle not in got[0].data


async def test_2026_clients_get_log_messages_only_when_a_request_opts_in(
    tmp_bundle: BundleFactory,
) -> None:
    bundle = tmp_bundle({"a.md": "---\ntype: t\n---\n", "bad.md": "---\n: [\n---\n"})
    got: list[types.LoggingMessageNotificationParams] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        got.append(params)

    server = server_for(bundle, skip_unparseable=True)
    async with Client(server, logging_callback=on_log, cache=None) as c:
        await c.call_tool("list_concepts", {})
        assert got == []
    async with Client(server, logging_callback=on_log, log_level="error", cache=None) as c:
        await c.call_tool("list_concepts", {})
        assert got == []
    async with Client(server, logging_callback=on_log, log_level="info", cache=None) as c:
        await c.call_tool("list_concepts", {})
        assert [m.level for m in got] == ["warning"] and "bad.md" in got[0].data


async def test_a_stuck_write_journal_is_an_error_message(tmp_bundle: BundleFactory) -> None:
    bundle = tmp_bundle({"a.md": "---\ntype: t\n---\n"})
    state = Path(bundle, ".bundle-mcp")
    state.mkdir()
    (state / "journal.json").write_text("{not json", encoding="utf-8")
    got: list[types.LoggingMessageNotificationParams] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        got.append(params)

    async with Client(server_for(bundle), mode="legacy", logging_callback=on_log) as c:
        result = await c.call_tool("list_concepts", {})
        assert not result.is_error
    assert [m.level for m in got] == ["error"]
    assert "pending write" in got[0].data and bundle not in got[0].data


async def test_a_call_with_a_progress_token_reports_start_loading_and_end(
    tmp_bundle: BundleFactory, mode: str
) -> None:
    """A cold load of 1,500 files reports intermediate progress from the loader."""
    bundle = tmp_bundle(
        {f"f{i // 100}/c{i}.md": f"---\ntype: t\ntitle: C{i}\n---\n# C{i}\n" for i in range(1500)}
    )
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))
        await anyio.sleep(0.15)  # a slow client: the loader's reports are throttled, not lost

    async with Client(server_for(bundle), mode=mode, cache=None) as c:
        result = await c.call_tool("list_concepts", {}, progress_callback=on_progress)
        assert not result.is_error
        warm: list[float] = []

        async def on_warm(progress: float, total: float | None, message: str | None) -> None:
            warm.append(progress)

        await c.call_tool("list_concepts", {})  # walks once more, then arms the folder watch
        await c.call_tool("list_concepts", {}, progress_callback=on_warm)
    values = [p for p, _, _ in seen]
    assert values[0] == 0 and values[-1] == 100
    assert values == sorted(values) and len(set(values)) == len(values)
    assert all(total == 100 for _, total, _ in seen)
    assert any("loading the bundle" in (m or "") for _, _, m in seen), seen
    assert warm == [0, 100]


# --------------------------------------------------------------------------------------------
# The change poll


async def test_the_change_poll_builds_resource_entries_off_the_event_loop(
    shop: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At the file cap a snapshot's resource entries take seconds to build; the poll built
    them on the event loop, so every answer of the connection waited that long."""
    threads: list[bool] = []
    original = resources.entries_of

    def recording(label: str, snapshot: Any) -> Any:
        threads.append(threading.current_thread() is threading.main_thread())
        return original(label, snapshot)

    monkeypatch.setattr(resources, "entries_of", recording)
    server = build_server(Dispatcher(ServeConfig(bundles=(shop,))), poll_seconds=0.05)
    async with Client(server, mode="legacy", cache=None) as c:
        # New captures until the poll has compared two (it works out the resources of a
        # capture only once a later one differs from the first it saw).
        with anyio.fail_after(30):
            for n in range(1000):
                Path(shop, "roast.md").write_text(f"---\ntype: process\n---\n# Roast {n}\n",
                                                  encoding="utf-8")
                await c.call_tool("list_concepts", {})
                await anyio.sleep(0.1)
                if len(threads) >= 2:
                    break
    assert threads and not any(threads), "the poll built resource entries on the event loop"


async def test_the_change_poll_works_out_no_resource_until_a_capture_differs(
    shop: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The poll's first look at a bundle comes while it loads cold; building every document's
    resource entry for the baseline then competed with the first call (2 s of a 50,000-concept
    bundle's first answer). The first capture is the baseline as it is; its resources are
    worked out when a later capture differs, and the change is announced as before."""
    built: list[Any] = []
    original = resources.entries_of

    def recording(label: str, snapshot: Any) -> Any:
        built.append(snapshot)
        return original(label, snapshot)

    monkeypatch.setattr(resources, "entries_of", recording)
    changed = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ResourceListChangedNotification):
            changed.set()

    server = build_server(Dispatcher(ServeConfig(bundles=(shop,))), poll_seconds=0.02)
    async with Client(server, mode="legacy", cache=None, message_handler=on_message) as c:
        await c.call_tool("list_concepts", {})
        await anyio.sleep(0.4)  # twenty polls of the same capture
        assert built == []
        Path(shop, "new.md").write_text("---\ntype: t\n---\n# New\n", encoding="utf-8")
        await c.call_tool("list_concepts", {})
        with anyio.fail_after(30):
            await changed.wait()
    assert len(built) == 2 and built[0] is not built[1]  # the baseline's capture, then the new
