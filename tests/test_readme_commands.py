"""Every shell command in README.md's fenced ``sh`` blocks runs and exits as the README implies.

Each command is matched against RUNNERS, in order; a command no runner claims fails the test, so
a new command in the README needs a decision here. Placeholders (``/abs/path/to/bundle``,
``path/to/bundle``, ``[--optional flags]``) are replaced by the example bundle and dropped; fixed
ports become port 0. Commands that would change the user's machine (pipx, uvx, docker, claude,
pre-commit) are never run here: their runner records why, and the routes they document are
exercised by tests/test_packaging.py, tests/test_dockerfile.py and tests/test_ci_integrations.py.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "coffee-roastery"
VENV_BIN = REPO / ".venv" / "bin"
SECONDS = 120


def readme_commands() -> list[str]:
    """The commands of every ``sh`` block: continuations joined, comments dropped, a heredoc
    kept with the command that opens it."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    commands: list[str] = []
    for block in re.findall(r"^```sh\n(.*?)^```", text, re.S | re.M):
        lines = iter(block.splitlines())
        for line in lines:
            command = line
            while command.endswith("\\"):
                command = command[:-1] + " " + next(lines).strip()
            heredoc = re.search(r"<<\s*'?(\w+)'?", command)
            if heredoc:
                body = []
                for more in lines:
                    body.append(more)
                    if more.strip() == heredoc.group(1):
                        break
                command = "\n".join([command, *body])
            else:
                command = _strip_comment(command)
            if command.strip():
                commands.append(command.strip())
    return commands


def _strip_comment(line: str) -> str:
    """The line without a trailing ``# comment`` (a '#' after a space, outside quotes)."""
    quote = ""
    for i, ch in enumerate(line):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip()
    return line.rstrip()


def concrete(command: str) -> str:
    """The README's placeholders replaced by things that exist here."""
    command = re.sub(r"\s\[[^\]]*\]", "", command)  # optional flags in a synopsis
    command = command.replace("/abs/path/to/bundle", str(EXAMPLE))
    command = command.replace("path/to/bundle", str(EXAMPLE))
    command = re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:0", command)
    if command == "make run":
        command += " HTTP=127.0.0.1:0"  # the documented port may be taken on this machine
    return command


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    env.pop("BUNDLE_MCP_TOKEN", None)
    return env


def run_to_completion(command: str) -> None:
    done = subprocess.run(
        ["bash", "-c", command], cwd=REPO, env=_env(), capture_output=True, text=True,
        timeout=SECONDS, stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, (command, done.stdout[-2000:], done.stderr[-2000:])


def run_until_serving(command: str) -> None:
    """A command that serves until stopped: it must come up (its client configuration printed
    over HTTP; over stdio, a clean exit when its input closes) without failing."""
    if "--http" not in command and "--serve" not in command and "make run" not in command:
        run_to_completion(command)
        return
    process = subprocess.Popen(
        ["bash", "-c", f"exec {command}"], cwd=REPO, env=_env(), stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )
    assert process.stdout is not None
    seen: list[str] = []
    deadline = time.monotonic() + SECONDS
    try:
        while time.monotonic() < deadline:
            line = process.stdout.readline()
            if not line:
                break
            seen.append(line)
            if "client configuration" in line or "view: serving" in line:
                return
        raise AssertionError(f"{command!r} did not come up: {''.join(seen)[-2000:]}")
    finally:
        os.killpg(process.pid, 15)
        process.wait(timeout=SECONDS)


def run_in_scratch(command: str) -> None:
    """A command that writes files (``> out``, ``-o FILE``): run in a scratch folder, the
    example bundle named by its absolute path, every stage of a pipe checked."""
    if re.search(r"\|\s*dot\b", command) and shutil.which("dot") is None:
        pytest.skip("Graphviz `dot` is not installed (apt-get install graphviz)")
    command = command.replace("examples/coffee-roastery", str(EXAMPLE))
    with tempfile.TemporaryDirectory() as scratch:
        done = subprocess.run(
            ["bash", "-o", "pipefail", "-c", command], cwd=scratch, env=_env(),
            capture_output=True, text=True, timeout=SECONDS, stdin=subprocess.DEVNULL,
        )
    assert done.returncode == 0, (command, done.stdout[-2000:], done.stderr[-2000:])


@dataclass(frozen=True)
class Runner:
    pattern: str  # a regular expression the whole command must match
    run: Callable[[str], None] | None  # None: never run here, for the reason given
    reason: str = ""


RUNNERS = (
    Runner(r"make test", None, "it is the command that runs this test"),
    Runner(r"make run", run_until_serving),
    Runner(r"bundle-mcp graph\b.*", run_in_scratch),
    Runner(r"(\.venv/bin/)?bundle-mcp (serve|call|validate|view)\b.*", run_until_serving),
    Runner(r"pipx install .*", None, "installs into the user's home"),
    Runner(r"python3 -m venv \.venv|\.venv/bin/pip install .*|make install .*", None,
           "installs the semantic extra (about 1.4 GB) from an index this test may not reach; "
           "CI's `make install EXTRAS=dev,semantic` installs it"),
    Runner(r"uvx .*", None, "builds into uv's cache"),
    Runner(r"claude mcp add .*", None, "changes the user's Claude Code settings"),
    Runner(r"cat > \.pre-commit-config\.yaml <<EOF.*", None,
           "writes into the current repository; tests/test_ci_integrations.py runs it"),
    Runner(r"pre-commit run .*", None, "tests/test_ci_integrations.py runs it"),
    Runner(r"docker (build|run) .*", None, "tests/test_dockerfile.py runs the build's steps"),
    Runner(r"export BUNDLE_MCP_TOKEN=.*", run_to_completion),
)


def _runner(command: str) -> Runner | None:
    return next((r for r in RUNNERS if re.fullmatch(r.pattern, command, re.S)), None)


COMMANDS = readme_commands()
# The commands this module runs; the others are only claimed (their runner says why not).
RUN_HERE = [c for c in COMMANDS if getattr(_runner(c), "run", None) is not None]


def test_the_readme_has_commands_and_each_has_a_runner() -> None:
    assert len(COMMANDS) >= 10 and RUN_HERE
    unclaimed = [c for c in COMMANDS if _runner(c) is None]
    assert unclaimed == [], "add a runner for each new README command"
    assert all(r.run is not None or r.reason for r in RUNNERS), "say why a command is not run"


@pytest.mark.parametrize("command", RUN_HERE, ids=[c.splitlines()[0][:60] for c in RUN_HERE])
def test_each_readme_command(command: str) -> None:
    runner = _runner(command)
    assert runner is not None and runner.run is not None
    if not VENV_BIN.joinpath("bundle-mcp").exists():
        pytest.skip("the README's commands run from the .venv that `make` installs")
    runner.run(concrete(command))
