"""A copy of this checkout's working tree in a temporary folder, optionally committed.

The packaging and CI-integration tests build, install and clone the project as a user would.
They work on a copy so that nothing is written into the checkout (``build/``, ``*.egg-info``) and
its git state is never touched: the copy holds the files git would see (tracked, and untracked but
not ignored), with the current, uncommitted contents, and gets a repository of its own.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
# A commit in a throwaway repository: no user configuration, hooks or signing.
GIT_ENV = {
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "bundle-mcp tests",
    "GIT_AUTHOR_EMAIL": "tests@bundle-mcp.invalid",
    "GIT_COMMITTER_NAME": "bundle-mcp tests",
    "GIT_COMMITTER_EMAIL": "tests@bundle-mcp.invalid",
}


def git(cwd: Path, *args: str, timeout: float = 60) -> str:
    done = subprocess.run(
        ["git", *args], cwd=cwd, env={**os.environ, **GIT_ENV}, capture_output=True,
        text=True, timeout=timeout, check=False,
    )
    if done.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout


def working_tree_files() -> list[str]:
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("needs git and a git checkout of the project")
    listed = git(REPO, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
    return sorted(p for p in set(listed.split("\0")) if p and (REPO / p).is_file())


def copy_working_tree(dest: Path) -> Path:
    """The checkout's files as they are now, under ``dest`` (which must not exist)."""
    for rel in working_tree_files():
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / rel, target)
    return dest


def committed_copy(dest: Path) -> tuple[Path, str]:
    """A copy of the working tree in a new repository with everything committed, and the commit."""
    copy_working_tree(dest)
    git(dest, "init", "--quiet")
    git(dest, "add", "--all")
    git(dest, "commit", "--quiet", "--no-verify", "-m", "working tree of the checkout under test")
    return dest, git(dest, "rev-parse", "HEAD").strip()
