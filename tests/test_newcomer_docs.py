"""What a newcomer meets first: the README's Install section, and a checkout without leftovers.

Issue 25 §8: the Install section spoke of "this project's machines" and of an index "that
serves that CPU build", which no user has; it must say what a user on Linux, macOS and Windows
gets and give the commands. A server log was committed at the root of the repository.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def _section(title: str) -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    start = text.index(f"\n## {title}\n")
    end = text.index("\n## ", start + 1)
    return text[start:end]


def test_the_install_section_speaks_to_users_of_each_system() -> None:
    install = _section("Install")
    assert "this project's machines" not in install
    assert "serves that" not in install
    for system in ("Linux", "macOS", "Windows"):
        assert system in install, system
    # Linux x86_64 users get the commands that avoid PyPI's CUDA build.
    assert re.search(r"pip install torch==\d+\.\d+\.\d+ --index-url " + re.escape(CPU_INDEX),
                     install)
    assert "CUDA" in install


def test_the_install_section_pins_the_torch_of_the_extra() -> None:
    pyproject = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    pinned = re.search(r'"torch==([\d.]+)"', pyproject)
    assert pinned is not None
    assert f"torch=={pinned.group(1)} --index-url" in _section("Install")


def test_no_log_file_is_committed() -> None:
    git = shutil.which("git")
    if git is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout (or no git): nothing to check")
    listed = subprocess.run([git, "ls-files", "*.log"], cwd=REPO, capture_output=True,
                            text=True, check=True, timeout=60)
    assert listed.stdout.split() == []
