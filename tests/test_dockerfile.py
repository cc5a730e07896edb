"""The Dockerfile builds and its image serves, checked without a Docker daemon.

The test parses the Dockerfile and emulates the build: the build context is a copy of this
repository filtered by ``.dockerignore``; the image's file system is a temporary folder (WORKDIR
and COPY destinations, and ENV values that are absolute paths, are taken inside it); a fresh
virtualenv stands in for the base image's Python. Every RUN line then runs in ``/bin/sh`` and must
succeed, and the installed ``bundle-mcp`` is started with the image's ENTRYPOINT and CMD (the
bundle "mounted" at its path inside that folder, the port made free), answering its HEALTHCHECK,
``/readyz`` and a tool call with the token from ``$BUNDLE_MCP_TOKEN``.

Emulated, so kept honest by refusing what it cannot emulate: another instruction, a second
stage, a RUN line naming an absolute path (it would act on this machine, not the image).
Differences: pip may use this machine's download cache (``PIP_NO_CACHE_DIR`` is not applied),
and without root, ``chown`` is a no-op (the build itself runs as root).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

try:
    from tests.served import printed_url
except ImportError:  # pytest run without the repository root on sys.path
    from served import printed_url  # type: ignore[no-redef,import-not-found]

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "coffee-roastery"
WAIT_SECONDS = 60
TOKEN = "docker-test-token"
INSTRUCTIONS = {
    "FROM", "ENV", "WORKDIR", "COPY", "RUN", "USER", "VOLUME", "EXPOSE", "HEALTHCHECK",
    "ENTRYPOINT", "CMD", "LABEL",
}
_NETWORK_TROUBLE = (
    "NewConnectionError", "Temporary failure in name resolution", "Network is unreachable",
    "ConnectTimeoutError", "No route to host",
)
# An absolute path in a RUN line: a "/" at the start of a word (not "$VAR/…" or "./…").
_ABSOLUTE = re.compile(r"""(?:^|[\s;&|=(<>'"])/""")


@dataclass
class Dockerfile:
    base: str = ""
    env: dict[str, str] = field(default_factory=dict)
    steps: list[tuple[str, str, str]] = field(default_factory=list)  # (instruction, args, workdir)
    user: str = ""
    volumes: list[str] = field(default_factory=list)
    exposed: list[str] = field(default_factory=list)
    healthcheck: list[str] = field(default_factory=list)
    entrypoint: list[str] = field(default_factory=list)
    cmd: list[str] = field(default_factory=list)


def parse(text: str) -> Dockerfile:
    lines: list[str] = []
    pending = ""
    for raw in text.splitlines():
        stripped = raw.strip()
        if not stripped or stripped.startswith("#"):
            continue  # comments and blank lines, also inside a continued instruction
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        lines.append(pending + stripped)
        pending = ""
    assert not pending, "the Dockerfile ends inside a continued line"

    image = Dockerfile()
    workdir = "/"
    for line in lines:
        word, _, rest = line.partition(" ")
        instruction, rest = word.upper(), rest.strip()
        assert instruction in INSTRUCTIONS, f"the emulation does not know {instruction}"
        if instruction == "FROM":
            assert not image.base, "one stage only: the emulation builds a single stage"
            image.base = rest
        elif instruction == "ENV":
            for pair in shlex.split(rest):
                key, sep, value = pair.partition("=")
                assert sep, f"ENV wants KEY=VALUE pairs, got {pair!r}"
                image.env[key] = value
        elif instruction == "WORKDIR":
            workdir = rest if rest.startswith("/") else f"{workdir.rstrip('/')}/{rest}"
            image.steps.append((instruction, workdir, workdir))
        elif instruction in ("COPY", "RUN"):
            image.steps.append((instruction, rest, workdir))
        elif instruction == "USER":
            image.user = rest
        elif instruction == "VOLUME":
            image.volumes += json.loads(rest) if rest.startswith("[") else rest.split()
        elif instruction == "EXPOSE":
            image.exposed += rest.split()
        elif instruction == "HEALTHCHECK":
            match = re.fullmatch(r"((?:--\S+\s+)*)CMD\s+(\[.*\])", rest)
            assert match, "HEALTHCHECK wants options and an exec-form CMD"
            image.healthcheck = json.loads(match.group(2))
        elif instruction in ("ENTRYPOINT", "CMD"):
            assert rest.startswith("["), f"{instruction} wants the exec form"
            setattr(image, instruction.lower(), json.loads(rest))
    return image


def ignore_patterns(text: str) -> list[re.Pattern[str]]:
    patterns = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        assert not line.startswith("!"), "the emulation does not handle '!' exceptions"
        line = line.removeprefix("./").strip("/")
        regex = ""
        for part in re.split(r"(\*\*/|\*\*|\*|\?)", line):
            regex += {"**/": "(?:.*/)?", "**": ".*", "*": "[^/]*", "?": "[^/]"}.get(
                part, re.escape(part)
            )
        patterns.append(re.compile(regex))
    return patterns


def build_context(destination: Path) -> None:
    """This repository as ``docker build .`` sends it: ``.dockerignore`` applied."""
    patterns = ignore_patterns((REPO / ".dockerignore").read_text(encoding="utf-8"))

    def ignored(relative: str) -> bool:
        return any(p.fullmatch(relative) for p in patterns)

    for folder, dirs, files in os.walk(REPO):
        relative = Path(folder).relative_to(REPO).as_posix()
        prefix = "" if relative == "." else relative + "/"
        dirs[:] = [d for d in dirs if not ignored(prefix + d)]  # an ignored folder: all of it
        for name in files:
            if not ignored(prefix + name):
                target = destination / (prefix + name)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(Path(folder, name), target, follow_symlinks=False)


class Emulation:
    def __init__(self, tmp: Path, image: Dockerfile) -> None:
        self.image = image
        self.root = tmp / "image"  # the image's "/"
        self.context = tmp / "context"
        self.venv = tmp / "python"  # stands in for the base image's Python
        self.tools = tmp / "tools"
        self.root.mkdir()
        self.tools.mkdir()
        base = getattr(sys, "_base_executable", None) or sys.executable
        subprocess.run([base, "-m", "venv", str(self.venv)], check=True, timeout=120)

    def inside(self, path: str) -> Path:
        assert path.startswith("/"), path
        return self.root / path.lstrip("/")

    def env(self) -> dict[str, str]:
        env = {
            k: v for k, v in os.environ.items()
            if not k.startswith(("BUNDLE_MCP_", "PYTHON", "VIRTUAL_ENV", "XDG_CACHE_HOME"))
        }
        for key, value in self.image.env.items():
            env[key] = str(self.inside(value)) if value.startswith("/") else value
        env.pop("PIP_NO_CACHE_DIR", None)
        env["PATH"] = os.pathsep.join([str(self.tools), str(self.venv / "bin"), env["PATH"]])
        env["VIRTUAL_ENV"] = str(self.venv)
        env["HOME"] = str(self.root)  # a numeric user without a passwd entry has HOME=/
        return env

    def build(self) -> None:
        build_context(self.context)
        if os.geteuid() != 0:  # the build runs as root; here chown could only fail
            stub = self.tools / "chown"
            stub.write_text("#!/bin/sh\nexit 0\n")
            stub.chmod(0o755)
        for instruction, args, workdir in self.image.steps:
            cwd = self.inside(workdir)
            if instruction == "WORKDIR":
                cwd.mkdir(parents=True, exist_ok=True)
            elif instruction == "COPY":
                self.copy(args, cwd)
            else:
                self.run(args, cwd)

    def copy(self, args: str, cwd: Path) -> None:
        words = [w for w in shlex.split(args) if not w.startswith("--")]
        *sources, destination = words
        target = self.inside(destination) if destination.startswith("/") else cwd / destination
        for source in sources:
            origin = (self.context / source).resolve()
            assert origin.is_relative_to(self.context.resolve()), source
            if origin.is_dir():
                shutil.copytree(origin, target, dirs_exist_ok=True, symlinks=True)
            else:
                folder = target if destination.endswith("/") else target.parent
                folder.mkdir(parents=True, exist_ok=True)
                shutil.copy2(origin, folder / origin.name if destination.endswith("/") else target)

    def run(self, line: str, cwd: Path) -> None:
        assert not _ABSOLUTE.search(line), (
            f"RUN names an absolute path, which the emulation would run on this machine: {line}"
        )
        done = subprocess.run(
            ["/bin/sh", "-c", line], cwd=cwd, env=self.env(), capture_output=True, text=True,
            timeout=600,
        )
        if done.returncode != 0 and any(s in done.stdout + done.stderr for s in _NETWORK_TROUBLE):
            pytest.skip(f"RUN needs the package index, which is unreachable: {line}")
        assert done.returncode == 0, f"RUN {line}\n{done.stdout}\n{done.stderr}"

    def command(self, port_spec: str) -> list[str]:
        """ENTRYPOINT + CMD, the bundle path inside the image folder, the port made free."""
        argv = [*self.image.entrypoint, *self.image.cmd]
        out = []
        for n, word in enumerate(argv):
            if n and argv[n - 1] == "--http":
                out.append(port_spec)
            elif word.startswith("/"):
                out.append(str(self.inside(word)))
            else:
                out.append(word)
        out[0] = str(self.venv / "bin" / out[0])
        return out


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Emulation:
    image = parse((REPO / "Dockerfile").read_text(encoding="utf-8"))
    emulation = Emulation(Path(os.path.realpath(tmp_path_factory.mktemp("docker"))), image)
    emulation.build()
    return emulation


def test_the_dockerfile_says_what_a_deployment_needs() -> None:
    image = parse((REPO / "Dockerfile").read_text(encoding="utf-8"))
    assert re.fullmatch(r"python:3\.1[1-9]-slim", image.base)
    uid = image.user.split(":")[0]
    assert uid.isdigit() and int(uid) != 0, "a numeric user other than root"
    assert image.entrypoint == ["bundle-mcp"]
    assert image.cmd == ["serve", "/bundle", "--http", "0.0.0.0:8765"]
    assert image.exposed == ["8765"]
    assert image.env["BUNDLE_MCP_CACHE_DIR"] in image.volumes
    assert "/healthz" in " ".join(image.healthcheck) and "8765" in " ".join(image.healthcheck)
    assert "BUNDLE_MCP_TOKEN" not in image.env  # a secret never goes into an image


def test_the_context_leaves_out_what_the_image_does_not_need(tmp_path: Path) -> None:
    build_context(tmp_path)
    kept = {p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")}
    for needed in ("pyproject.toml", "README.md", "src/bundle_mcp/cli.py",
                   "contracts/error.schema.json"):
        assert needed in kept
    for left_out in (".git", ".venv", "tests", "bench", "examples"):
        assert left_out not in kept
    assert not any("__pycache__" in p or p.endswith(".pyc") for p in kept)


def test_the_run_lines_install_a_bundle_mcp_that_serves(built: Emulation) -> None:
    image = built.image
    python = built.venv / "bin" / "python"
    where = subprocess.run(
        [str(python), "-c", "import bundle_mcp; print(bundle_mcp.__file__)"],
        capture_output=True, text=True, check=True, cwd=built.root, env=built.env(),
    ).stdout.strip()
    assert Path(where).is_relative_to(built.venv), "installed, not run from the sources"
    assert not any(built.inside(image.steps[0][2]).iterdir()), "the sources were removed"
    cache = built.inside(image.env["BUNDLE_MCP_CACHE_DIR"])
    assert cache.is_dir()
    if os.geteuid() == 0:
        assert str(cache.stat().st_uid) == image.user.split(":")[0], "the user owns the cache"

    shutil.copytree(EXAMPLE, built.inside("/bundle"))  # docker run -v ...:/bundle:ro
    env = {**built.env(), "BUNDLE_MCP_TOKEN": TOKEN}
    log = built.root.parent / "serve.log"
    with log.open("wb") as stderr:  # the child keeps its own copy of the descriptor
        process = subprocess.Popen(
            built.command("127.0.0.1:0"), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=stderr, env=env, cwd=built.root,
        )
    try:
        url = _wait_for_url(process, log)
        port = url.split(":")[2].split("/")[0]
        assert "without a token" not in log.read_text(), "the token came from the environment"
        health = [w.replace("127.0.0.1:8765", f"127.0.0.1:{port}") for w in image.healthcheck]
        assert subprocess.run(health, env=env, timeout=30).returncode == 0
        _wait_until_ready(url.removesuffix("/mcp"))
        assert _post(url, None)[0] == 401
        status, reply = _post(url, f"Bearer {TOKEN}")
        assert status == 200 and not reply["result"]["isError"], reply
        assert reply["result"]["structuredContent"]["concepts"]
        deadline = time.monotonic() + WAIT_SECONDS  # the parse cache lands in the volume
        while not list(cache.glob("parse/*.sqlite3")):
            assert time.monotonic() < deadline, f"nothing cached in {cache}: {log.read_text()}"
            time.sleep(0.2)
    finally:
        process.terminate()
        process.wait(timeout=WAIT_SECONDS)
    assert subprocess.run(health, env=env, timeout=30, capture_output=True).returncode != 0


def _wait_for_url(process: subprocess.Popen[bytes], log: Path) -> str:
    return printed_url(process, log, WAIT_SECONDS)


def _wait_until_ready(base: str) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while True:
        try:
            with urllib.request.urlopen(base + "/readyz", timeout=10) as response:
                if response.status == 200:
                    return
        except urllib.error.HTTPError as exc:
            assert exc.code == 503
        assert time.monotonic() < deadline, "never ready"
        time.sleep(0.05)


def _post(url: str, authorization: str | None) -> tuple[int, dict[str, Any]]:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "list_concepts", "arguments": {}}}
    headers = {"Content-Type": "application/json",
               "Accept": "application/json, text/event-stream",
               "MCP-Protocol-Version": "2025-11-25"}
    if authorization:
        headers["Authorization"] = authorization
    request = urllib.request.Request(url, json.dumps(body).encode(), headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, {}
