"""The history tools beyond their goldens: git is run so that nothing in the environment or the
repository's configuration redirects it or runs a program, a bundle in a repository's subfolder
sees paths below itself, and a diff past its budget is refused, never cut."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from bundle_mcp.dispatch import Dispatcher, ServeConfig
from bundle_mcp.vcs.git import revision_problem

CONCEPT = "---\ntype: Guide\ntitle: {title}\n---\n# {title}\n"


def _git(repo: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update({"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1",
                "GIT_AUTHOR_NAME": "Ann", "GIT_AUTHOR_EMAIL": "ann@example.com",
                "GIT_COMMITTER_NAME": "Ann", "GIT_COMMITTER_EMAIL": "ann@example.com"})
    return subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True,
                          text=True, timeout=60).stdout.strip()


def _write(repo: Path, files: dict[str, str]) -> None:
    for relative, text in files.items():
        target = repo / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """kb/ is the bundle; kb/notes/roast.md came from outside it (drafts/roast.md)."""
    repo = Path(os.path.realpath(tmp_path)) / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    _write(repo, {"drafts/roast.md": CONCEPT.format(title="Roast"), "kb/index.md": "# KB\n"})
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "draft outside the bundle")
    (repo / "kb" / "notes").mkdir()
    _git(repo, "mv", "drafts/roast.md", "kb/notes/roast.md")
    _git(repo, "commit", "-q", "-m", "into the bundle")
    _write(repo, {"kb/notes/roast.md": CONCEPT.format(title="Roast") + "Twelve minutes.\n"})
    _git(repo, "commit", "-q", "-am", "edit")
    return repo


def _call(bundle: Path, tool: str, **arguments: Any) -> dict[str, Any]:
    outcome = Dispatcher(ServeConfig(bundles=(str(bundle),))).call(tool, arguments)
    return outcome.structured


def test_a_bundle_in_a_subfolder_sees_paths_below_itself(repo: Path) -> None:
    history = _call(repo / "kb", "concept_history", concept_id="notes/roast")
    # The commit where the file lay outside kb/ is not the bundle's: left out, counted.
    assert [c["subject"] for c in history["commits"]] == ["edit", "into the bundle"]
    assert {c["path"] for c in history["commits"]} == {"notes/roast.md"}
    assert history["omitted"] == 1
    diff = _call(repo / "kb", "concept_diff", **{"concept_id": "notes/roast", "from": "HEAD~1"})
    assert diff["paths"] == ["notes/roast.md"]
    assert "a/notes/roast.md" in diff["diff"] and "kb/" not in diff["diff"]
    # Back to where the file was outside the bundle: refused, nothing of it shown.
    refused = _call(repo / "kb", "concept_diff", **{"concept_id": "notes/roast", "from": "HEAD~2"})
    assert refused["code"] == "operation_rejected"


def test_inherited_git_variables_do_not_redirect_git(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A GIT_DIR or GIT_WORK_TREE left in the server's environment points nowhere useful; the
    history is still the bundle's own."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    _git(elsewhere, "init", "-q")
    monkeypatch.setenv("GIT_DIR", str(elsewhere / ".git"))
    monkeypatch.setenv("GIT_WORK_TREE", str(elsewhere))
    history = _call(repo / "kb", "concept_history", concept_id="notes/roast")
    assert [c["subject"] for c in history["commits"]] == ["edit", "into the bundle"]


def test_the_repository_configuration_runs_no_program(repo: Path, tmp_path: Path) -> None:
    """core.fsmonitor, an external diff driver (diff.external and a .gitattributes driver) and
    textconv are all programs a diff against the work tree would run."""
    witness = tmp_path / "ran"
    script = tmp_path / "hook.sh"
    script.write_text(f"#!/bin/sh\necho ran >> {witness}\n", encoding="utf-8")
    script.chmod(0o755)
    for key, value in (("core.fsmonitor", str(script)), ("diff.external", str(script)),
                       ("diff.evil.command", str(script)), ("diff.evil.textconv", str(script))):
        _git(repo, "config", key, value)
    _write(repo, {".gitattributes": "*.md diff=evil\n"})
    _write(repo, {"kb/notes/roast.md": CONCEPT.format(title="Roast") + "Uncommitted.\n"})
    diff = _call(repo / "kb", "concept_diff", **{"concept_id": "notes/roast", "from": "HEAD"})
    assert "+Uncommitted." in diff["diff"]
    assert not witness.exists()


def test_a_diff_past_its_budget_is_refused_not_cut(repo: Path) -> None:
    big = "".join(f"line {n:07d} of a long concept\n" for n in range(40_000))
    _write(repo, {"kb/notes/roast.md": CONCEPT.format(title="Roast") + big})
    refused = _call(repo / "kb", "concept_diff", **{"concept_id": "notes/roast", "from": "HEAD"})
    assert refused["code"] == "resource_limit"
    assert "512 KiB" in refused["message"]


def test_a_repository_without_commits_has_no_history(tmp_path: Path) -> None:
    repo = Path(os.path.realpath(tmp_path)) / "empty"
    repo.mkdir()
    _git(repo, "init", "-q")
    _write(repo, {"a.md": CONCEPT.format(title="A")})
    history = _call(repo, "concept_history", concept_id="a")
    assert history["commits"] == [] and history["total"] == 0


@pytest.mark.parametrize("value", ["HEAD", "HEAD~2", "main^", "v1.2", "abc1234", "HEAD@{1}"])
def test_revisions_pass(value: str) -> None:
    assert revision_problem(value) is None


@pytest.mark.parametrize(
    "value",
    ["--output=/tmp/x", "-p", ".hidden", "a..b", "HEAD:secret.md", "@{-1}", "a b", "", "x/",
     "HEAD\n--all"],
)
def test_revisions_that_are_options_or_ranges_are_refused(value: str) -> None:
    assert revision_problem(value) is not None


def test_an_option_revision_is_refused_even_past_the_contract(repo: Path) -> None:
    """The runtime check holds for a caller that skips the contract (the Python API)."""
    from bundle_mcp.errors import BundleError
    from bundle_mcp.vcs.history import resolve, work_tree

    with pytest.raises(BundleError) as refused:
        resolve(work_tree(str(repo / "kb")), "--output=/tmp/x", "$.from")
    assert refused.value.code == "invalid_request"
    assert not Path("/tmp/x").exists()
