"""Readers: the file (schema, rules, line numbers), tokens, reloads, scoped writes, one code path
for forbidden and absent, and a real `serve --http --readers` with two teams."""

from __future__ import annotations

import http.client
import json
import logging
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from bundle_mcp.dispatch import Dispatcher, ServeConfig
from bundle_mcp.okf.scopes import NOTHING, Access, FolderScope
from bundle_mcp.readers import (
    ALL_READER,
    Reader,
    ReaderBook,
    ReadersFileError,
    hash_token,
    load_readers,
)
from served import printed_url, stop
from toolcall import fill_parse_cache

FINANCE_TOKEN = "finance-token-0123456789"
SALES_TOKEN = "sales-token-0123456789"

TWO_TEAMS = f"""\
# Two teams and a shared glossary.
[[readers]]
name = "finance"
tokens = ["{hash_token(FINANCE_TOKEN)}"]
read = ["finance", "glossary", "/"]
write = ["finance/drafts"]

[[readers]]
name = "sales"
tokens = ["{hash_token(SALES_TOKEN)}"]
read = ["sales", "glossary"]
"""


def _bundle(root: Path) -> Path:
    files = {
        "index.md": "# Acme\n\n- [Glossary](glossary/margin.md)\n",
        "finance/q3-plan.md": "---\ntype: Plan\ntitle: Q3 plan\ntags: [secret]\n---\n"
                              "# Q3 plan\n\nThe margin target, see [margin](../glossary/margin.md)."
                              "\n",
        "finance/drafts/note.md": "---\ntype: Note\ntitle: Draft note\n---\n# Draft\n",
        "sales/pipeline.md": "---\ntype: Report\ntitle: Pipeline\n---\n# Pipeline\n\n"
                             "Deals by [margin](../glossary/margin.md).\n",
        "glossary/margin.md": "---\ntype: Glossary Term\ntitle: Margin\n---\n# Margin\n\n"
                              "Revenue less cost. Used by [the plan](../finance/q3-plan.md).\n",
    }
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text, encoding="utf-8")
    return root


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    return _bundle(Path(os.path.realpath(tmp_path)) / "acme")


@pytest.fixture
def readers_file(tmp_path: Path) -> Path:
    path = tmp_path / "readers.toml"
    path.write_text(TWO_TEAMS, encoding="utf-8")
    return path


# ------------------------------------------------------------------------------ the file


def test_two_teams_and_a_shared_folder(readers_file: Path) -> None:
    readers = load_readers(readers_file)
    finance, sales = readers.readers
    assert (finance.name, sales.name) == ("finance", "sales")
    assert finance.access.read.reads_file("glossary/margin.md")
    assert finance.access.read.reads_file("index.md")
    assert not sales.access.read.reads_file("index.md")
    assert finance.access.may_write("finance/drafts/new.md")
    assert not finance.access.may_write("finance/q3-plan.md")
    assert not sales.access.may_write("sales/pipeline.md")  # no write list: writes nothing
    assert readers.by_token(FINANCE_TOKEN.encode()) == finance
    assert readers.by_token(SALES_TOKEN.encode()) == sales
    assert readers.by_token(b"guess") is None
    assert readers.by_token(hash_token(FINANCE_TOKEN).encode()) is None  # the hash is no token


def test_the_yaml_form_reads_the_same(tmp_path: Path, readers_file: Path) -> None:
    yaml_file = tmp_path / "readers.yaml"
    yaml_file.write_text(
        "readers:\n"
        "  - name: finance\n"
        f"    tokens: ['{hash_token(FINANCE_TOKEN)}']\n"
        "    read: [finance, glossary, /]\n"
        "    write: [finance/drafts]\n"
        "  - name: sales\n"
        f"    tokens: ['{hash_token(SALES_TOKEN)}']\n"
        "    read: [sales, glossary]\n",
        encoding="utf-8",
    )
    assert load_readers(yaml_file).readers == load_readers(readers_file).readers


@pytest.mark.parametrize(
    ("suffix", "text", "expected"),
    [
        (".toml", "[[readers]]\nname = 'a'\nread = ['x'\n", "not valid TOML"),
        (".toml", "[[readers]]\nname = 'a'\nread = ['x']\ncolour = 'red'\n",
         ":1: readers[0]: Additional properties"),
        (".toml", "[[readers]]\nname = 'a'\nread = ['x']\n\n[[readers]]\nname = 'b'\n"
                  "tokens = ['plain-token']\nread = ['y']\n", ":7: readers[1].tokens[0]"),
        (".toml", "[[readers]]\nname = 'a'\nread = [\n  'fine',\n  '../up',\n]\n",
         ":5: readers[0].read[1]: '../up'"),
        (".toml", "[[readers]]\nname = 'a'\nread = ['x']\n[[readers]]\nname = 'a'\n"
                  "read = ['y']\n", ":5: a second reader named 'a'"),
        (".toml", f"[[readers]]\nname = 'a'\ntokens = ['{hash_token('t')}']\nread = ['x']\n"
                  f"[[readers]]\nname = 'b'\ntokens = ['{hash_token('t')}']\nread = ['y']\n",
         ":7: this token hash already picks reader 'a'"),
        (".yaml", "readers:\n  - name: a\n    read: [x]\n  - name: b\n    read: [/abs]\n",
         ":5: readers[1].read[0]: '/abs'"),
        (".yaml", "readers:\n  - name: a\n    read: [x]\n  - name: 'b c'\n    read: [y]\n",
         ":4: readers[1].name"),
        (".yaml", "readers: &r\n  - name: a\n    read: [x]\nagain: *r\n", ":4: YAML aliases"),
        (".yaml", "readers:\n  - name: a\n    read: [x\n", "not valid YAML"),
        (".yaml", "readers: []\n", ":1: readers: [] should be non-empty"),
    ],
)
def test_a_bad_file_is_one_clear_error_with_its_line(
    tmp_path: Path, suffix: str, text: str, expected: str
) -> None:
    path = tmp_path / f"readers{suffix}"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ReadersFileError) as caught:
        load_readers(path)
    assert str(caught.value).startswith(str(path))
    assert expected in str(caught.value)


def test_a_reload_picks_up_the_file_and_a_broken_one_changes_nothing(
    readers_file: Path, caplog: pytest.LogCaptureFixture
) -> None:
    book = ReaderBook(load_readers(readers_file))
    readers_file.write_text(TWO_TEAMS.replace('"sales", "glossary"', '"sales"'), "utf-8")
    assert book.reload()
    assert not book.current().readers[1].access.read.reads_file("glossary/margin.md")
    readers_file.write_text("[[readers]\n", "utf-8")
    with caplog.at_level(logging.ERROR):
        assert not book.reload()
    assert "previous readers stay in force" in caplog.text
    assert book.current().named("sales") is not None


def test_a_catch_up_reloads_only_a_changed_file(
    readers_file: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A --workers worker ignores SIGHUP until its handler is in place, then catches up once:
    with the file unchanged it keeps the readers in force and says nothing."""
    book = ReaderBook(load_readers(readers_file))
    in_force = book.current()
    with caplog.at_level(logging.WARNING):
        assert not book.reload(only_if_changed=True)
    assert book.current() is in_force and "reloaded" not in caplog.text
    readers_file.write_text(TWO_TEAMS.replace('"sales", "glossary"', '"sales"'), "utf-8")
    with caplog.at_level(logging.WARNING):
        assert book.reload(only_if_changed=True)
    assert "readers reloaded" in caplog.text
    assert not book.current().readers[1].access.read.reads_file("glossary/margin.md")


def test_the_sighup_handler_catches_up_once_it_is_installed() -> None:
    from bundle_mcp.server import reload_on_sighup

    caught = threading.Event()
    with reload_on_sighup(lambda: None, catch_up=caught.set):
        assert caught.wait(10)


# ------------------------------------------------------------------------------ dispatch


def _reader(read: list[str], write: list[str] | None = None) -> Reader:
    return Reader("r", Access(FolderScope.of(read),
                              FolderScope.of(write) if write else NOTHING))


def _call(dispatcher: Dispatcher, bundle: Path, reader: Reader, tool: str,
          **arguments: Any) -> dict[str, Any]:
    outcome = dispatcher.call(tool, {"bundle_path": str(bundle), **arguments}, None, reader)
    return {"is_error": outcome.is_error, **outcome.structured}


def test_forbidden_and_absent_read_alike(bundle: Path) -> None:
    dispatcher = Dispatcher(ServeConfig(bundles=(str(bundle),)))
    sales = _reader(["sales", "glossary"])
    for tool, key in (("read_concept", "concept_id"), ("fetch_slice", "entity_id"),
                      ("get_neighbors", "concept_id")):
        forbidden = _call(dispatcher, bundle, sales, tool, **{key: "finance/q3-plan"})
        absent = _call(dispatcher, bundle, sales, tool, **{key: "finance/q4-plan"})
        assert forbidden["is_error"] and absent["is_error"]
        assert forbidden["code"] == absent["code"]
        assert json.dumps(forbidden).replace("q3", "qN") == json.dumps(absent).replace("q4", "qN")


def _trace(run: Callable[[], object]) -> list[str]:
    """Every bundle_mcp function entered while ``run`` runs, in order (qualified names)."""
    entered: list[str] = []

    def profile(frame: Any, event: str, arg: object) -> None:
        if event == "call" and frame.f_globals.get("__name__", "").startswith("bundle_mcp"):
            entered.append(f"{frame.f_globals['__name__']}.{frame.f_code.co_qualname}")

    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)
    return entered


@pytest.mark.parametrize(("tool", "key"), [("read_concept", "concept_id"),
                                           ("fetch_slice", "entity_id")])
def test_forbidden_and_absent_take_the_same_code_path(bundle: Path, tool: str, key: str) -> None:
    """Timing is no oracle: the same functions run, in the same order, for an ID the reader
    may not read and for one that does not exist (not a wall-clock comparison)."""
    dispatcher = Dispatcher(ServeConfig(bundles=(str(bundle),)))
    sales = _reader(["sales", "glossary"])
    _call(dispatcher, bundle, sales, tool, **{key: "sales/pipeline"})  # warm: views built
    _call(dispatcher, bundle, sales, tool, **{key: "finance/q4-plan"})
    forbidden = _trace(lambda: _call(dispatcher, bundle, sales, tool,
                                     **{key: "finance/q3-plan"}))
    absent = _trace(lambda: _call(dispatcher, bundle, sales, tool, **{key: "finance/q4-plan"}))
    assert forbidden and forbidden == absent


def test_the_revision_moves_only_with_what_the_reader_sees(bundle: Path) -> None:
    dispatcher = Dispatcher(ServeConfig(bundles=(str(bundle),)))
    sales = _reader(["sales", "glossary"])

    def revision(reader: Reader) -> str:
        return str(_call(dispatcher, bundle, reader, "bundle_summary")["snapshot_revision"])

    before_sales, before_all = revision(sales), revision(ALL_READER)
    (bundle / "finance/q3-plan.md").write_text("---\ntype: Plan\n---\n# Changed\n", "utf-8")
    assert revision(sales) == before_sales
    assert revision(ALL_READER) != before_all
    (bundle / "sales/pipeline.md").write_text("---\ntype: Report\n---\n# Changed\n", "utf-8")
    assert revision(sales) != before_sales


def _write_concept(dispatcher: Dispatcher, bundle: Path, reader: Reader,
                   concept_id: str) -> dict[str, Any]:
    return _call(dispatcher, bundle, reader, "write_concept", concept_id=concept_id,
                 frontmatter="type: Note\ntitle: New", body="# New\n")


def _files(bundle: Path) -> list[str]:
    return sorted(p.relative_to(bundle).as_posix() for p in bundle.rglob("*"))


def test_writes_stay_inside_the_writable_folders(bundle: Path) -> None:
    dispatcher = Dispatcher(ServeConfig(bundles=(str(bundle),)))
    finance = _reader(["finance", "glossary", "/"], ["finance/drafts"])
    before = _files(bundle)
    for outside in ("finance/new", "glossary/new", "sales/new", "new"):
        refused = _write_concept(dispatcher, bundle, finance, outside)
        assert refused["is_error"] and refused["code"] == "operation_rejected", refused
        assert "may write" in refused["message"]
    assert _files(bundle) == before
    written = _write_concept(dispatcher, bundle, finance, "finance/drafts/new")
    assert not written["is_error"], written
    assert (bundle / "finance/drafts/new.md").is_file()


def test_cas_compares_the_readers_own_revision(bundle: Path) -> None:
    dispatcher = Dispatcher(ServeConfig(bundles=(str(bundle),)))
    finance = _reader(["finance", "glossary", "/"], ["finance/drafts"])
    operations = [{"kind": "set_lifecycle", "concept_id": "finance/drafts/note",
                   "lifecycle": {"status": "stable", "stale_after": "2027-01-01"}}]
    preview = _call(dispatcher, bundle, finance, "preview_concept_patch", actor="t",
                    operations=operations)
    assert not preview["is_error"], preview
    # A change the reader cannot see is no conflict for it.
    (bundle / "sales/pipeline.md").write_text("---\ntype: Report\n---\n# Moved on\n", "utf-8")
    applied = _call(dispatcher, bundle, finance, "apply_concept_patch", actor="t",
                    operations=operations, expected_revision=preview["base_revision"],
                    expected_plan_digest=preview["plan_digest"])
    assert applied["status"] == "applied", applied
    after = _call(dispatcher, bundle, finance, "bundle_summary")["snapshot_revision"]
    # bundle_summary gives the revision without the sha256: prefix the write tools carry.
    assert applied["result_revision"] == preview["result_revision"] == "sha256:" + after
    # One it can see is.
    (bundle / "glossary/margin.md").write_text("---\ntype: Glossary Term\n---\n# M\n", "utf-8")
    again = _call(dispatcher, bundle, finance, "apply_concept_patch", actor="t",
                  operations=operations, expected_revision=applied["result_revision"],
                  expected_plan_digest=preview["plan_digest"])
    assert again["is_error"] and again["code"] == "revision_conflict"


def test_a_patch_outside_the_writable_folders_is_refused_before_staging(bundle: Path) -> None:
    dispatcher = Dispatcher(ServeConfig(bundles=(str(bundle),)))
    finance = _reader(["finance", "glossary", "/"], ["finance/drafts"])
    operations = [{"kind": "set_lifecycle", "concept_id": "glossary/margin",
                   "lifecycle": {"status": "stable", "stale_after": "2027-01-01"}}]
    preview = _call(dispatcher, bundle, finance, "preview_concept_patch", actor="t",
                    operations=operations)
    # The preview applies its apply's scope (tests/test_reader_scopes.py has the details).
    assert not preview["is_error"] and preview["status"] == "rejected", preview
    applied = _call(dispatcher, bundle, finance, "apply_concept_patch", actor="t",
                    operations=operations, expected_revision=preview["base_revision"],
                    expected_plan_digest="sha256:" + "0" * 64)
    assert applied["is_error"] and applied["code"] == "operation_rejected"
    assert "status: stable" not in (bundle / "glossary/margin.md").read_text("utf-8")
    assert not (bundle / ".bundle-mcp").exists()


def test_the_call_log_names_the_reader_never_the_token(
    bundle: Path, caplog: pytest.LogCaptureFixture
) -> None:
    dispatcher = Dispatcher(ServeConfig(bundles=(str(bundle),)))
    reader = Reader("sales", Access(FolderScope.of(["sales"]), NOTHING),
                    frozenset({hash_token(SALES_TOKEN)}))
    with caplog.at_level(logging.INFO, logger="bundle_mcp.calls"):
        _call(dispatcher, bundle, reader, "list_concepts")
    assert "list_concepts called by reader sales" in caplog.text
    assert SALES_TOKEN not in caplog.text and hash_token(SALES_TOKEN) not in caplog.text


# ------------------------------------------------------------------------------ over HTTP


@pytest.fixture
def served(bundle: Path, readers_file: Path, tmp_path: Path
           ) -> Iterator[tuple[int, subprocess.Popen[bytes], Path]]:
    log = tmp_path / "stderr.log"
    with log.open("wb") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "bundle_mcp.cli", "serve", str(bundle),
             "--http", "127.0.0.1:0", "--readers", str(readers_file)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr,
        )
    try:
        url = printed_url(process, log)
        yield int(url.rsplit(":", 1)[1].split("/", 1)[0]), process, log
    finally:
        stop(process)


def _rpc(port: int, token: str | None, method: str, params: dict[str, Any]) -> tuple[int, Any]:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
    headers = {"Content-Type": "application/json",
               "Accept": "application/json, text/event-stream",
               "MCP-Protocol-Version": "2025-06-18"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request("POST", "/mcp", body=body, headers=headers)
        response = connection.getresponse()
        raw = response.read()
        return response.status, json.loads(raw) if raw else None
    finally:
        connection.close()


def _tool(port: int, token: str, name: str, **arguments: Any) -> dict[str, Any]:
    status, reply = _rpc(port, token, "tools/call", {"name": name, "arguments": arguments})
    assert status == 200, reply
    result: dict[str, Any] = reply["result"]["structuredContent"]
    return result


def _get(port: int, path: str) -> int:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        response.read()
        return response.status
    finally:
        connection.close()


def test_two_readers_over_http_get_different_consistent_answers(
    served: tuple[int, subprocess.Popen[bytes], Path], readers_file: Path
) -> None:
    port, process, log = served
    finance = [c["id"] for c in _tool(port, FINANCE_TOKEN, "list_concepts")["concepts"]]
    sales = [c["id"] for c in _tool(port, SALES_TOKEN, "list_concepts")["concepts"]]
    assert finance == ["finance/drafts/note", "finance/q3-plan", "glossary/margin"]
    assert sales == ["glossary/margin", "sales/pipeline"]
    neighbours = _tool(port, SALES_TOKEN, "get_neighbors", concept_id="glossary/margin",
                       direction="both")
    assert "finance/q3-plan" not in json.dumps(neighbours)
    assert _rpc(port, "nobody", "tools/list", {})[0] == 401
    assert _get(port, "/healthz") == 200 and _get(port, "/readyz") in (200, 503)
    # SIGHUP: the file is read again; the sales token now reads finance too.
    readers_file.write_text(TWO_TEAMS.replace('read = ["sales", "glossary"]',
                                              'read = ["sales", "glossary", "finance"]'), "utf-8")
    process.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + 20
    while "finance/q3-plan" not in json.dumps(_tool(port, SALES_TOKEN, "list_concepts")):
        assert time.monotonic() < deadline, log.read_text("utf-8")
        time.sleep(0.1)
    text = log.read_text("utf-8")
    assert "called by reader sales" in text and "called by reader finance" in text
    assert SALES_TOKEN not in text and FINANCE_TOKEN not in text


def test_serve_refuses_a_bad_readers_file_with_its_line(tmp_path: Path, bundle: Path) -> None:
    bad = tmp_path / "readers.toml"
    bad.write_text("[[readers]]\nname = 'a'\nread = ['../up']\n", "utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "bundle_mcp.cli", "serve", str(bundle), "--readers", str(bad)],
        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2
    assert f"{bad}:3: readers[0].read[0]" in done.stderr


# ------------------------------------------------------------------------------ over stdio


@pytest.mark.anyio
async def test_stdio_serves_the_reader_it_was_started_as(bundle: Path, readers_file: Path) -> None:
    """`serve --readers FILE --reader sales` over stdio, through the Python SDK's client: the
    tools and the resources both see the sales view only."""
    import mcp.types as types
    from mcp import Client, StdioServerParameters

    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "bundle_mcp.cli", "serve", str(bundle), "--readers", str(readers_file),
              "--reader", "sales"],
    )
    async with Client(server, mode="legacy", cache=None) as client:
        listed = await client.call_tool("list_concepts", {})
        assert isinstance(listed.structured_content, dict)
        ids = [c["id"] for c in listed.structured_content["concepts"]]
        assert ids == ["glossary/margin", "sales/pipeline"]
        forbidden = await client.call_tool("read_concept", {"concept_id": "finance/q3-plan"})
        assert forbidden.is_error
        names = {r.name for r in (await client.list_resources()).resources}
        assert names and not any("finance" in name or "q3" in name for name in names)
        assert all(isinstance(r, types.Resource) for r in (await client.list_resources()).resources)


@pytest.mark.parametrize("restart", [False, True], ids=["cold", "restart"])
def test_stdio_sighup_widens_the_reader_and_logs_only_its_own_calls(
    bundle: Path, readers_file: Path, tmp_path: Path, restart: bool
) -> None:
    """Over stdio, SIGHUP re-reads the file and the named reader's new scope is in force for
    the next calls. The log has one "called by reader" line per call the client made: the
    warm-up's own calls (list_concepts among them) are nobody's. After a restart the first
    call is answered before the SDK is imported (bundle_mcp.first_call), and the SIGHUP right
    after it comes before the server's handler exists: it is caught up with, never the end
    of the process."""
    log = tmp_path / "stderr.log"
    cache = tmp_path / "cache"
    if restart:
        fill_parse_cache(str(bundle), str(cache))
    with log.open("wb") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "bundle_mcp.cli", "serve", str(bundle), "--readers",
             str(readers_file), "--reader", "sales"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
            env={**os.environ, "BUNDLE_MCP_CACHE_DIR": str(cache),
                 "BUNDLE_MCP_LOG_LEVEL": "debug"},
        )
    assert process.stdin is not None and process.stdout is not None
    ids = iter(range(1, 10_000))
    # Lines are read by a thread, so a server that stops answering fails the test in 60 s
    # instead of hanging it.
    lines: queue.Queue[bytes] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in process.stdout or ()],
                     daemon=True).start()

    def send(method: str, params: dict[str, Any], *, notify: bool = False) -> Any:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
        if not notify:
            message["id"] = next(ids)
        assert process.stdin is not None
        process.stdin.write(json.dumps(message).encode() + b"\n")
        process.stdin.flush()
        if notify:
            return None
        while True:
            try:
                reply = json.loads(lines.get(timeout=60))
            except queue.Empty:
                raise AssertionError(log.read_text("utf-8")) from None
            if reply.get("id") == message["id"]:
                return reply

    def listed() -> list[str]:
        reply = send("tools/call", {"name": "list_concepts", "arguments": {}})
        return [c["id"] for c in reply["result"]["structuredContent"]["concepts"]]

    try:
        send("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                            "clientInfo": {"name": "test", "version": "1"}})
        send("notifications/initialized", {}, notify=True)
        calls = 1
        assert listed() == ["glossary/margin", "sales/pipeline"]
        readers_file.write_text(TWO_TEAMS.replace('read = ["sales", "glossary"]',
                                                  'read = ["sales", "glossary", "finance"]'),
                                "utf-8")
        process.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 60
        while "finance/q3-plan" not in listed():
            calls += 1
            assert time.monotonic() < deadline, log.read_text("utf-8")
            time.sleep(0.1)
        calls += 1
    finally:
        stop(process)
    text = log.read_text("utf-8")
    assert "readers reloaded" in text
    assert ("list_concepts answered before the SDK was imported" in text) is restart
    assert text.count("list_concepts called by reader sales") == calls
    assert "called by reader" not in text.replace("list_concepts called by reader sales", "")
