"""Shared fixtures: bundles written on the fly, and fake tools for testing the dispatch core.

The fake tools have their own small contract files (written into a temporary contracts folder
next to a copy of the real error.schema.json), so the dispatcher, the server and the protocol can
be tested without depending on the real tools' output.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

from bundle_mcp.cancel import CancelToken
from bundle_mcp.contracts import ContractSet
from bundle_mcp.dispatch import Dispatcher, ServeConfig
from bundle_mcp.errors import BundleError
from bundle_mcp.model import Snapshot
from bundle_mcp.toolspec import ToolSpec

REPO = Path(__file__).resolve().parent.parent


def _test_cache() -> str | None:
    """A cache folder for this test run, or ``None`` when the environment names one already.

    Persistent caches (parse packs, embeddings) go to a folder of this test run, never the
    user's ~/.cache; subprocess servers started by the tests inherit it through the environment,
    and so do pytest-xdist's workers, which therefore make no folder of their own. The process
    that made the folder removes it when pytest ends (:func:`pytest_unconfigure`): a test run
    used to leave one ``/tmp/bundle-mcp-test-cache-*`` behind per process, hundreds in a day.
    """
    if "XDG_CACHE_HOME" in os.environ and "BUNDLE_MCP_CACHE_DIR" in os.environ:
        return None
    folder = tempfile.mkdtemp(prefix="bundle-mcp-test-cache-")
    os.environ.setdefault("XDG_CACHE_HOME", folder)
    os.environ.setdefault("BUNDLE_MCP_CACHE_DIR", os.path.join(folder, "bundle-mcp"))
    return folder


_OWN_TEST_CACHE = _test_cache()
REAL_CONTRACTS = REPO / "contracts"

# Hypothesis: "dev" (the default) for the edit-test loop, "ci" (.ci/run sets HYPOTHESIS_PROFILE)
# fewer examples and no deadline, since a shared CI machine's timing says nothing.
settings.register_profile("ci", max_examples=50, deadline=None)
settings.register_profile("dev", max_examples=200)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))

# The fast tier (`make test`) deselects `slow`; `make test-all` (what .ci/run runs) runs all.
# Modules whose every test starts a server process, builds a wheel or an image, runs npm, node
# or Chromium, or drives a long stateful property run:
SLOW_MODULES = frozenset({
    "test_ci_integrations",  # GitHub Action and pre-commit hook from a checkout
    "test_cli_serve",  # serve subprocesses
    "test_deploy",  # the deploy manifests' servers
    "test_dockerfile",  # the Dockerfile's RUN lines in a fresh venv
    "test_health_probes",  # /healthz and /readyz of served children
    "test_http_keep_alive",  # idle keep-alive connections to served children
    "test_http_token",  # bearer tokens against a served child
    "test_http_workers",  # --workers processes
    "test_packaging",  # wheel and sdist builds, installed into fresh venvs
    "test_read_only_mount",  # a served child on a read-only mount
    "test_remote_serve",  # serve git+file://… children, refreshed
    "test_readme_commands",  # every README command, some of them servers
    "test_stdio_transport",  # stdio children
    "test_surfaces_stdio",  # stdio children
    "test_ts_client",  # npm and the TypeScript SDK client
    "test_viewer_browser",  # headless Chromium
    "test_write_stateful",  # SIGKILL mid-apply, stateful hypothesis
})
# Fixtures that install or start something slow, wherever a test uses them.
SLOW_FIXTURES = frozenset({"mermaid_parser"})  # npm-installs the Mermaid parser


def pytest_unconfigure(config: pytest.Config) -> None:
    if _OWN_TEST_CACHE is not None:
        # ignore_errors: a server a test left running may still be writing into it.
        shutil.rmtree(_OWN_TEST_CACHE, ignore_errors=True)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        module = item.module.__name__ if item.module is not None else ""
        if module in SLOW_MODULES or SLOW_FIXTURES.intersection(item.fixturenames):
            item.add_marker(pytest.mark.slow)

BundleFactory = Callable[[Mapping[str, str | bytes]], str]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def mermaid_parser(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real Mermaid parser (tests/mermaid_harness.py), installed once per session."""
    from mermaid_harness import parser_script

    return parser_script(tmp_path_factory)


@pytest.fixture
def tmp_bundle(tmp_path: Path) -> BundleFactory:
    """Write ``{relative_path: text}`` into a fresh folder and return its absolute path."""
    counter = itertools.count()
    # realpath: bundle paths must not contain a symlink, and some systems link their tmp dir.
    base = Path(os.path.realpath(tmp_path))

    def make(files: Mapping[str, str | bytes]) -> str:
        root = base / f"bundle{next(counter)}"
        root.mkdir()
        for relative, content in files.items():
            target = root / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                target.write_bytes(content)
            else:
                target.write_text(content, encoding="utf-8")
        return str(root)

    return make


# --------------------------------------------------------------------------------------------
# Fake tools


FAKE_INPUT = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "bundle_path": {"type": "string", "minLength": 1, "maxLength": 4096, "pattern": "^/"},
        "word": {"type": "string", "maxLength": 16, "description": "A word to echo back."},
        "size": {"type": "integer", "minimum": 0, "maximum": 1_000_000},
        "seconds": {"type": "number", "minimum": 0, "maximum": 30},
    },
}

FAKE_OUTPUT = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "additionalProperties": False,
    "required": ["word", "concepts", "revision"],
    "properties": {
        "word": {"type": "string"},
        "concepts": {"type": "array", "items": {"type": "string"}},
        "revision": {"type": "string"},
        "pad": {"type": "string"},
    },
}


@dataclass
class FakeTools:
    """The fake tool modules, plus what they observed while running."""

    modules: dict[str, ToolSpec]
    contracts: ContractSet
    started: threading.Event = field(default_factory=threading.Event)
    stopped_by_cancel: threading.Event = field(default_factory=threading.Event)
    seen: list[tuple[Snapshot, dict[str, Any]]] = field(default_factory=list)
    # How many calls of the slow tool are running now, and a condition to wait on for a count.
    slow_running: int = 0
    slow_changed: threading.Condition = field(default_factory=threading.Condition)

    def wait_for_slow_calls(self, count: int, timeout: float) -> bool:
        """Block until at least ``count`` slow calls run at once (False after ``timeout`` s)."""
        with self.slow_changed:
            return self.slow_changed.wait_for(lambda: self.slow_running >= count, timeout)

    def _slow_call(self, change: int) -> None:
        with self.slow_changed:
            self.slow_running += change
            self.slow_changed.notify_all()

    def dispatcher(self, **config: Any) -> Dispatcher:
        return Dispatcher(ServeConfig(**config), self.contracts, tools=self.modules)


def fake_spec(name: str, run: Callable[..., Any], **attrs: Any) -> ToolSpec:
    """A fake tool's spec; its ``run`` takes (snapshot, params, token) like the old tools did."""
    return ToolSpec(
        name=name,
        title=name.replace("_", " ").capitalize(),
        toolset="read",
        description=f"Fake tool {name} for tests.",
        read_only=attrs.pop("read_only", True),
        needs_parseable=attrs.pop("needs_parseable", True),
        run=lambda call, params: run(call.snapshot, params, call.token),
        **attrs,
    )


@pytest.fixture
def fake_tools(tmp_path: Path) -> FakeTools:
    folder = tmp_path / "contracts"
    folder.mkdir()
    shutil.copy(REAL_CONTRACTS / "error.schema.json", folder / "error.schema.json")
    names = ("bad", "boom", "budget", "echo", "raw", "slow", "survey", "write_thing")
    for name in names:
        (folder / f"{name}.input.schema.json").write_text(json.dumps(FAKE_INPUT), "utf-8")
        (folder / f"{name}.output.schema.json").write_text(json.dumps(FAKE_OUTPUT), "utf-8")
    fakes = FakeTools(modules={}, contracts=ContractSet(folder))

    def echo(snapshot: Snapshot, params: dict[str, Any], token: CancelToken) -> dict[str, Any]:
        fakes.seen.append((snapshot, params))
        return {
            "word": params.get("word", ""),
            "concepts": list(snapshot.concepts),
            "revision": snapshot.revision,
            "pad": "x" * params.get("size", 0),
        }

    def survey(snapshot: Snapshot, params: dict[str, Any], token: CancelToken) -> dict[str, Any]:
        return {
            "word": "survey",
            "concepts": [d.path for d in snapshot.broken],
            "revision": snapshot.revision,
        }

    def slow(snapshot: Snapshot, params: dict[str, Any], token: CancelToken) -> dict[str, Any]:
        fakes._slow_call(+1)
        fakes.started.set()
        deadline = time.monotonic() + params.get("seconds", 10)
        try:
            while time.monotonic() < deadline:
                token.check()
                time.sleep(0.005)  # the fake work itself: a call that runs for `seconds`
        except BundleError:
            fakes.stopped_by_cancel.set()
            raise
        finally:
            fakes._slow_call(-1)
        return {"word": "slow", "concepts": [], "revision": snapshot.revision}

    def boom(snapshot: Snapshot, params: dict[str, Any], token: CancelToken) -> dict[str, Any]:
        raise ValueError("secret detail at /etc/shadow")

    def bad(snapshot: Snapshot, params: dict[str, Any], token: CancelToken) -> dict[str, Any]:
        return {"word": 5, "concepts": [], "revision": snapshot.revision}

    fakes.modules.update(
        {
            "bad": fake_spec("bad", bad),
            "boom": fake_spec("boom", boom),
            "budget": fake_spec("budget", echo, output_budget=256),
            "echo": fake_spec("echo", echo),
            "raw": fake_spec("raw", echo, text=lambda result, snapshot: f"raw:{result['word']}"),
            "slow": fake_spec("slow", slow),
            "survey": fake_spec("survey", survey, needs_parseable=False),
            "write_thing": fake_spec("write_thing", echo, read_only=False),
        }
    )
    return fakes


SIMPLE_BUNDLE = {
    "index.md": "# Coffee\n\n- [Roast](roast.md)\n",
    "roast.md": "---\ntype: process\ntitle: Roast\n---\n# Roast\n\nSee [beans](beans.md).\n",
    "beans.md": "---\ntype: ingredient\ntitle: Beans\n---\n# Beans\n",
}


@pytest.fixture
def simple_bundle(tmp_bundle: BundleFactory) -> str:
    return tmp_bundle(SIMPLE_BUNDLE)
