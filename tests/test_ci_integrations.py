"""The composite GitHub Action (action.yml) and the pre-commit hook (.pre-commit-hooks.yaml), run.

The action: its ``run:`` steps execute with bash as the runner would (``bash --noprofile --norc
-eo pipefail``), ``${{ github.action_path }}`` replaced by a copy of this checkout, ``${{ inputs.*
}}`` by the inputs or their defaults, in a temporary git repository set as ``$GITHUB_WORKSPACE``;
``$GITHUB_ENV`` and ``$GITHUB_OUTPUT`` work as files. pre-commit: installed from the package
index into a virtualenv of the test (skipped with the reason when it cannot be), then
``pre-commit run --all-files`` in a repository whose config names a committed copy of this
checkout as ``repo:`` with its commit as ``rev:``. The checkout itself is never written to.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

try:
    from tests.checkout_copy import REPO, committed_copy, copy_working_tree, git
except ImportError:  # pytest run without the repository root on sys.path
    from checkout_copy import (  # type: ignore[no-redef,import-not-found]
        REPO,
        committed_copy,
        copy_working_tree,
        git,
    )

EXPRESSION = re.compile(r"\$\{\{\s*([^}]*?)\s*\}\}")
OFFLINE = ("NewConnectionError", "Temporary failure in name resolution", "Network is unreachable",
           "ConnectTimeoutError", "Connection refused")
BROKEN = "no frontmatter here\n"
BAD_STATUS = "---\ntype: Note\nstatus: retired\n---\n# Bad status\n\n[gone](gone.md)\n"


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME") and not k.startswith("GITHUB_")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return {**env, **extra}


def consumer_repo(path: Path, files: dict[str, str]) -> Path:
    """A git repository holding a small bundle under docs/kb (and whatever ``files`` add)."""
    bundle = {
        "docs/kb/index.md": "# Notes\n\n- [Good](good.md) - fine\n- [Bad](bad.md) - status\n",
        "docs/kb/good.md": "---\ntype: Note\n---\n# Good\n",
        "docs/kb/bad.md": BAD_STATUS,
        **files,
    }
    for rel, text in bundle.items():
        (path / rel).parent.mkdir(parents=True, exist_ok=True)
        (path / rel).write_text(text, encoding="utf-8")
    git(path, "init", "--quiet")
    git(path, "add", "--all")
    git(path, "commit", "--quiet", "--no-verify", "-m", "bundle")
    return path


# --- the composite action ----------------------------------------------------------------------


class Runner:
    """Just enough of a GitHub runner for a composite action's bash steps."""

    def __init__(self, action_path: Path, workspace: Path, temp: Path) -> None:
        self.action = yaml.safe_load((action_path / "action.yml").read_text("utf-8"))
        self.action_path = action_path
        self.workspace = workspace
        self.temp = temp
        self.exported: dict[str, str] = {}

    def expand(self, text: str, inputs: dict[str, str]) -> str:
        def value(m: re.Match[str]) -> str:
            expr = m.group(1)
            if expr == "github.action_path":
                return str(self.action_path)
            if expr.startswith("inputs."):
                name = expr.removeprefix("inputs.")
                spec = self.action["inputs"][name]  # a KeyError is an unknown input
                return inputs.get(name, str(spec.get("default", "")))
            raise AssertionError(f"the test runner does not know ${{{{ {expr} }}}}")
        return EXPRESSION.sub(value, text)

    def run_step(self, step: dict[str, Any], inputs: dict[str, str]) -> tuple[int, str, str,
                                                                                dict[str, str]]:
        assert step["shell"] == "bash"
        script = step["run"]
        # Inputs reach scripts through env: only the action's own path is pasted into a script.
        assert {m.group(1) for m in EXPRESSION.finditer(script)} <= {"github.action_path"}
        env_file, output_file = self.temp / "github_env", self.temp / "github_output"
        env_file.write_text("")
        output_file.write_text("")
        step_env = {k: self.expand(str(v), inputs) for k, v in step.get("env", {}).items()}
        env = _env(GITHUB_WORKSPACE=str(self.workspace), GITHUB_ENV=str(env_file),
                   GITHUB_OUTPUT=str(output_file), GITHUB_ACTION_PATH=str(self.action_path),
                   RUNNER_TEMP=str(self.temp), **self.exported, **step_env)
        path = self.temp / "step.sh"
        path.write_text(self.expand(script, inputs))
        done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(path)],
                              cwd=self.workspace, env=env, capture_output=True, text=True,
                              timeout=900, check=False)
        self.exported.update(_key_values(env_file.read_text()))
        return done.returncode, done.stdout, done.stderr, _key_values(output_file.read_text())

    def step(self, name: str) -> dict[str, Any]:
        (found,) = [s for s in self.action["runs"]["steps"] if s["name"] == name]
        return dict(found)


def _key_values(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


@pytest.fixture(scope="module")
def runner(tmp_path_factory: pytest.TempPathFactory) -> Runner:
    base = tmp_path_factory.mktemp("action")
    action_path = copy_working_tree(base / "action")
    workspace = consumer_repo(base / "workspace", {"docs/kb/broken.md": BROKEN})
    (base / "temp").mkdir()
    runner = Runner(action_path, workspace, base / "temp")
    code, out, err, _ = runner.run_step(runner.step("Install bundle-mcp"),
                                        {"python": sys.executable})
    if code != 0 and any(word in out + err for word in OFFLINE):
        pytest.skip("the action's pip install could not reach the package index (offline?)")
    assert code == 0, out[-2000:] + err[-2000:]
    assert Path(runner.exported["BUNDLE_MCP_BIN"]).is_file()
    return runner


def test_the_action_declares_every_validate_flag() -> None:
    action = yaml.safe_load((REPO / "action.yml").read_text("utf-8"))
    assert action["runs"]["using"] == "composite"
    assert set(action["inputs"]) >= {"bundle", "strict", "check-links", "check-orphans",
                                     "target-version", "temporal-profile", "as-of", "format",
                                     "output"}
    assert action["inputs"]["bundle"]["required"] is True
    for name, spec in action["inputs"].items():
        assert spec.get("description"), name
    text = (REPO / "action.yml").read_text("utf-8")
    assert 'pip install --quiet --disable-pip-version-check "${{ github.action_path }}"' in text
    assert "upload" not in text.replace("uploads nothing", "").replace("upload it", "")


def test_the_action_annotates_the_bundle_relative_to_the_workspace(runner: Runner) -> None:
    code, out, err, outputs = runner.run_step(
        runner.step("Validate the bundle"),
        {"bundle": "docs/kb", "strict": "true", "check-links": "true", "check-orphans": "true"})
    assert code == 1, err  # broken.md has no frontmatter
    lines = out.splitlines()
    assert lines[0].startswith(
        "::error file=docs/kb/broken.md,line=1,title=okf missing_frontmatter::")
    assert "::warning file=docs/kb/bad.md,line=3,title=okf invalid_status::" in out
    assert "::warning file=docs/kb/broken.md,title=okf orphan::" in out
    assert "::notice file=docs/kb/bad.md,line=7,title=okf broken_link::" in out
    assert lines[-1].startswith("::notice title=okf summary::4 files scanned; 1 errors, ")
    assert lines[-1].endswith("NOT conformant; every finding is annotated")
    assert outputs == {"report": ""}


def test_the_action_writes_sarif_to_a_file_for_a_later_upload(runner: Runner) -> None:
    code, out, err, outputs = runner.run_step(
        runner.step("Validate the bundle"),
        {"bundle": f"{runner.workspace}/docs/../docs/kb", "format": "sarif",
         "output": "okf.sarif"})
    assert (code, out) == (1, ""), err
    assert outputs == {"report": "okf.sarif"}
    log = json.loads((runner.workspace / "okf.sarif").read_text("utf-8"))
    (run,) = log["runs"]
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == runner.workspace.as_uri() + "/"
    locations = [r["locations"][0]["physicalLocation"]["artifactLocation"]
                 for r in run["results"]]
    assert locations == [{"uri": "docs/kb/bad.md", "uriBaseId": "%SRCROOT%"},  # invalid_status
                         {"uri": "docs/kb/broken.md", "uriBaseId": "%SRCROOT%"}]
    (runner.workspace / "okf.sarif").unlink()


def test_the_action_passes_a_conformant_bundle_and_refuses_a_bad_switch(runner: Runner) -> None:
    (runner.workspace / "docs" / "kb" / "broken.md").rename(runner.temp / "broken.md")
    try:
        code, out, err, _ = runner.run_step(runner.step("Validate the bundle"),
                                            {"bundle": "docs/kb", "as-of": "2026-03-01"})
        assert code == 0, out + err
        assert out.splitlines()[-1].endswith(": conformant; every finding is annotated")
        code, out, _, _ = runner.run_step(runner.step("Validate the bundle"),
                                          {"bundle": "docs/kb", "strict": "yes"})
        assert code == 2
        assert out == "::error title=okf action::input strict must be true or false\n"
    finally:
        (runner.temp / "broken.md").rename(runner.workspace / "docs" / "kb" / "broken.md")


# --- pre-commit --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pre_commit(tmp_path_factory: pytest.TempPathFactory) -> Path:
    venv = tmp_path_factory.mktemp("pre-commit") / "v"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300,
                   env=_env(), capture_output=True)
    done = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet",
                           "pre-commit"], capture_output=True, text=True, timeout=900,
                          env=_env(), check=False)
    if done.returncode != 0:
        pytest.skip("pre-commit could not be installed from the package index: "
                    + (done.stderr.strip().splitlines() or ["no output"])[-1])
    return venv / "bin" / "pre-commit"


def test_pre_commit_runs_the_hook_from_a_checkout(pre_commit: Path, tmp_path: Path) -> None:
    checkout, commit = committed_copy(tmp_path / "bundle-mcp")
    config = (
        "repos:\n"
        f"  - repo: {checkout}\n"
        f"    rev: {commit}\n"
        "    hooks:\n"
        "      - id: bundle-mcp-validate\n"
        "        args: [docs/kb, --check-links]\n"
    )
    repo = consumer_repo(tmp_path / "consumer", {".pre-commit-config.yaml": config})
    env = _env(PRE_COMMIT_HOME=str(tmp_path / "pre-commit-home"), PRE_COMMIT_COLOR="never")

    def run() -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(pre_commit), "run", "--all-files"], cwd=repo, env=env,
                              capture_output=True, text=True, timeout=900, check=False)

    passed = run()
    if passed.returncode != 0 and any(word in passed.stdout for word in OFFLINE):
        pytest.skip("pre-commit could not install the hook's dependencies (offline?)")
    assert passed.returncode == 0, passed.stdout[-3000:] + passed.stderr[-3000:]
    assert re.search(r"^validate OKF bundle\.+Passed$", passed.stdout, re.M), passed.stdout
    (repo / "docs" / "kb" / "broken.md").write_text(BROKEN, encoding="utf-8")
    git(repo, "add", "--all")
    failed = run()
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert re.search(r"^validate OKF bundle\.+Failed$", failed.stdout, re.M), failed.stdout
    assert "broken.md:1: ERROR missing_frontmatter: missing YAML frontmatter block" in failed.stdout
    assert ": NOT conformant" in failed.stdout
