"""search_semantic is offered only where it can answer: with the semantic extra installed.

Issue 25 §5. Whether the extra is there is simulated both ways, whichever way this machine is
(CI installs the extra, a developer may not): the dispatcher is handed an embedding index whose
source says its packages are absent or present, and the command line's probe looks for module
names that cannot exist (pytest's ``monkeypatch`` puts them back after each test).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from bundle_mcp import cli
from bundle_mcp.dispatch import Dispatcher, ServeConfig
from bundle_mcp.rest import openapi_document
from bundle_mcp.semantic import EmbedderSource, SemanticIndex, embedder
from bundle_mcp.server import build_server
from bundle_mcp.tools import load_tools

ALL_TOOLS = set(load_tools())
SEMANTIC_TOOLS = {name for name, spec in load_tools().items() if spec.toolset == "semantic"}
REPO = Path(__file__).resolve().parent.parent


def _never_loaded() -> Any:
    raise AssertionError("no test here loads a model")


def _index(installed: bool) -> SemanticIndex:
    source = EmbedderSource(
        model_key="probe", dimension=3, max_chars=100,
        available=lambda: installed, load=_never_loaded,
    )
    return SemanticIndex(source, None)


@pytest.fixture(params=[False, True], ids=["extra-absent", "extra-installed"])
def installed(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


@pytest.fixture
def dispatcher(installed: bool, simple_bundle: str) -> Iterator[Dispatcher]:
    index = _index(installed)
    try:
        yield Dispatcher(ServeConfig(bundles=(simple_bundle,)), semantic=index)
    finally:
        index.close()


def _expected(installed: bool) -> set[str]:
    return ALL_TOOLS if installed else ALL_TOOLS - SEMANTIC_TOOLS


def test_the_semantic_toolset_is_only_search_semantic() -> None:
    assert SEMANTIC_TOOLS == {"search_semantic"}


def test_the_dispatcher_serves_search_semantic_only_with_the_extra(
    dispatcher: Dispatcher, installed: bool
) -> None:
    assert {tool.name for tool in dispatcher.tools()} == _expected(installed)
    assert dispatcher.needs_extra("search_semantic") is not installed
    assert not dispatcher.needs_extra("search_concepts")


def test_tools_list_over_mcp_follows_the_extra(dispatcher: Dispatcher, installed: bool) -> None:
    async def listed() -> set[str]:
        async with Client(build_server(dispatcher)) as client:
            return {tool.name for tool in (await client.list_tools()).tools}

    assert anyio.run(listed) == _expected(installed)


def test_the_rest_api_document_follows_the_extra(dispatcher: Dispatcher, installed: bool) -> None:
    document = openapi_document(dispatcher, secured=False)
    assert ("/api/tools/search_semantic" in document["paths"]) is installed
    assert "search_semantic" not in json.dumps(document) or installed


def test_no_index_keeps_search_semantic_for_seed_ids_calls() -> None:
    """The Python API's and the tests' dispatcher, without an embedding index: unchanged."""
    served = {tool.name for tool in Dispatcher(ServeConfig(allow_any_bundle=True)).tools()}
    assert served == ALL_TOOLS


def test_asking_the_dispatcher_for_the_semantic_toolset_without_the_extra_is_refused() -> None:
    index = _index(False)
    try:
        with pytest.raises(ValueError, match="semantic extra"):
            Dispatcher(ServeConfig(toolsets=frozenset({"read", "semantic"})), semantic=index)
    finally:
        index.close()


@pytest.fixture
def extra_absent(monkeypatch: pytest.MonkeyPatch) -> None:
    """The packaged model's probe looks for a module no machine has."""
    monkeypatch.setattr(embedder, "EXTRA_MODULES", ("bundle_mcp_test_no_such_module",))
    assert not embedder.MINILM.available()


@pytest.mark.parametrize("value", ["semantic", "read,semantic", "semantic,walk"])
def test_serve_tools_semantic_without_the_extra_exits_2_with_the_install_command(
    value: str, simple_bundle: str, extra_absent: None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["serve", simple_bundle, "--tools", value]) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith("bundle-mcp: --tools semantic: the semantic extra is not installed")
    assert "pip install '/path/to/bundle-mcp[semantic]'" in err


def test_serve_tools_without_semantic_does_not_need_the_extra(
    simple_bundle: str, extra_absent: None
) -> None:
    assert cli._toolsets("read,walk") == frozenset({"read", "walk"})


def test_call_search_semantic_without_the_extra_says_how_to_install(
    simple_bundle: str, extra_absent: None, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["call", "search_semantic", "--bundle", simple_bundle, "query=x"]
    assert cli.main(argv) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert "search_semantic needs the semantic extra" in err
    assert "[semantic]" in err


def test_deciding_imports_none_of_the_extra() -> None:
    """The start-up probe looks the packages up; importing torch would cost seconds."""
    code = (
        "import sys\n"
        "from bundle_mcp.dispatch import Dispatcher, ServeConfig\n"
        "from bundle_mcp.semantic import SemanticIndex\n"
        "index = SemanticIndex.default()\n"
        "names = {t.name for t in Dispatcher(ServeConfig(allow_any_bundle=True), "
        "semantic=index).tools()}\n"
        "index.close()\n"
        "heavy = sorted(m for m in ('torch', 'sentence_transformers', 'transformers') "
        "if m in sys.modules)\n"
        "print(heavy)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=False, cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
