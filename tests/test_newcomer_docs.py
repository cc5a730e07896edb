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


# Issue 27: the decisions, split by area under docs/decisions/, each dated, with a status and the
# test that pins it; docs/DECISIONS.md is their index.

DECISIONS = REPO / "docs" / "decisions"
# The entry's last line(s): "  *2026-12-03 · accepted · pinned by `tests/...`.*" (may wrap).
STATUS_LINE = re.compile(
    r"^  \*(\d{4}-\d{2}-\d{2}) · (accepted|rejected|superseded)[^·]* · (pinned by|no test)")
PINNED_TEST = re.compile(r"`tests/(test_\w+\.py)(?:::(\w+))?`")


def _decision_files() -> list[Path]:
    files = sorted(DECISIONS.glob("*.md"))
    assert files, "docs/decisions/ holds no area file"
    return files


def test_every_area_file_is_short_and_listed_in_the_index() -> None:
    index = (REPO / "docs" / "DECISIONS.md").read_text(encoding="utf-8")
    for path in _decision_files():
        lines = path.read_text(encoding="utf-8").count("\n")
        assert lines <= 400, f"{path.name}: {lines} lines (split the area)"
        assert f"(decisions/{path.name})" in index, f"{path.name} has no line in docs/DECISIONS.md"
    for target in re.findall(r"\]\((decisions/[\w-]+\.md)\)", index):
        assert (REPO / "docs" / target).is_file(), target


def test_every_decision_has_a_date_a_status_and_its_test() -> None:
    for path in _decision_files():
        lines = path.read_text(encoding="utf-8").split("\n")
        starts = [n for n, line in enumerate(lines) if line.startswith("- ")]
        for n in starts:
            end = next((m for m in range(n + 1, len(lines))
                        if lines[m].startswith(("- ", "#")) or lines[m] == ""), len(lines))
            block = lines[n:end]
            # A bullet that only lists the section's tests needs no line of its own.
            if block[0].startswith("- Pinned by"):
                continue
            status_at = [m for m, line in enumerate(block) if STATUS_LINE.match(line)]
            assert status_at, f"{path.name}:{n + 1}: no date · status · test line"
            assert " ".join(block[status_at[0]:]).endswith(".*"), f"{path.name}:{n + 1}"


def test_the_tests_a_decision_names_exist() -> None:
    missing = []
    for path in _decision_files():
        text = path.read_text(encoding="utf-8")
        for module, function in PINNED_TEST.findall(text):
            test_file = REPO / "tests" / module
            if not test_file.is_file():
                missing.append(f"{path.name}: tests/{module}")
            elif function and f"def {function}(" not in test_file.read_text(encoding="utf-8"):
                missing.append(f"{path.name}: tests/{module}::{function}")
    assert missing == []


# Issue 27: a clone alone explains itself. The code and the docs cited "DESIGN.md §N" of a design
# note the repository did not ship; they now cite docs/DESIGN.md, which must hold the section.

DESIGN_CITATION = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*DESIGN\.md) §(\d+)")


def _cited_design_sections() -> list[tuple[str, str, str]]:
    cited = []
    for top in ("src", "docs"):
        for path in sorted((REPO / top).rglob("*")):
            if path.suffix not in (".py", ".md") or not path.is_file():
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
            rel = path.relative_to(REPO).as_posix()
            for file, section in DESIGN_CITATION.findall(text):
                cited.append((rel, file, section))
    return cited


def test_every_design_citation_names_a_section_the_repository_ships() -> None:
    cited = _cited_design_sections()
    assert cited, "nothing cites docs/DESIGN.md: the check would pass vacuously"
    broken = []
    for rel, file, section in cited:
        # A doc under docs/ may cite its neighbour by name; everything else names the path.
        base = REPO / rel if rel.startswith("docs/") and "/" not in file else REPO
        target = (base.parent if base != REPO else REPO) / file
        if not target.is_file():
            broken.append(f"{rel}: {file} §{section} (no such file)")
            continue
        headings = re.findall(r"^## (\d+)\. ", target.read_text(encoding="utf-8"), re.M)
        if section not in headings:
            broken.append(f"{rel}: {file} §{section} (no such section)")
    assert broken == []
