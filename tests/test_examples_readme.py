"""examples/README.md says what the example bundle holds: its concept count and its folders.

Issue 25 §8: the README said 32 concepts when there were 34, and its layout left out two
folders. Both are read from the README and compared with the bundle as the loader sees it.
"""

from __future__ import annotations

import re
from pathlib import Path

from bundle_mcp.cancel import CancelToken
from bundle_mcp.loader import load_bundle

REPO = Path(__file__).resolve().parent.parent
README = REPO / "examples" / "README.md"
BUNDLE = REPO / "examples" / "coffee-roastery"
INDENT = 2  # spaces per folder level in the layout block


def _readme() -> str:
    return README.read_text(encoding="utf-8")


def _layout() -> dict[str, int]:
    """The layout block's folders (bundle-relative, ``/``-separated) → the concepts it counts
    for each (the numbers in its description: "2 standards, 1 session record" is 3)."""
    block = _readme().split("## Layout", 1)[1].split("```", 2)[1]
    folders: dict[str, int] = {}
    parents: list[str] = []
    for line in block.splitlines():
        entry = re.match(r"( *)(\S+)/\s*(.*)", line)
        if entry is None or entry.group(2) == "coffee-roastery":
            continue
        level = len(entry.group(1)) // INDENT - 1
        parents[level:] = [entry.group(2)]
        description = entry.group(3).split("(", 1)[0]
        counts = re.findall(r"\b(\d+) [A-Za-z]", description)
        folders["/".join(parents)] = sum(int(n) for n in counts)
    return folders


def _concepts() -> dict[str, str]:
    snapshot, _ = load_bundle(str(BUNDLE), CancelToken())
    return {cid: str(doc.fm.get("type") or "") for cid, doc in snapshot.concepts.items()}


def test_every_concept_of_the_example_has_a_type() -> None:
    assert [cid for cid, kind in _concepts().items() if not kind.strip()] == []


def test_the_readme_states_the_concept_count() -> None:
    stated = re.search(r"It has (\d+) concepts", _readme())
    assert stated is not None
    assert int(stated.group(1)) == len(_concepts())


def test_the_layout_shows_every_folder_with_its_concepts() -> None:
    on_disk = {p.relative_to(BUNDLE).as_posix() for p in BUNDLE.rglob("*") if p.is_dir()}
    layout = _layout()
    assert sorted(layout) == sorted(on_disk)
    per_folder = {folder: 0 for folder in on_disk}
    for cid in _concepts():
        per_folder[cid.rpartition("/")[0]] += 1
    assert layout == per_folder
