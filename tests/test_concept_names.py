"""One rule for what a concept ID may be (ids.concept_id_problem), applied everywhere.

- A write whose name the file system would refuse (a segment over 255 bytes, a path over 4096)
  or the loader would not serve is refused with ``invalid_request`` before anything is staged:
  the bundle stays byte for byte the same, not even the state folder appears.
- A concept file whose name cannot be an ID (a newline, a tab, ``\\``, ``:``, surrounding spaces,
  a C1 control) is never listed: validation reports it as an ERROR naming the file and why, and
  every ID that list_concepts does return is accepted by every tool that takes one.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from bundle_mcp.dispatch import Dispatcher, ServeConfig

if TYPE_CHECKING:
    from conftest import BundleFactory

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "coffee-roastery"


def tree(root: str) -> dict[str, bytes]:
    """Every file and folder under root, the state folder included."""
    out: dict[str, bytes] = {}
    for folder, dirs, files in os.walk(root):
        for d in dirs:
            out[os.path.relpath(os.path.join(folder, d), root) + "/"] = b""
        for name in files:
            full = os.path.join(folder, name)
            out[os.path.relpath(full, root)] = Path(full).read_bytes()
    return out


@pytest.fixture
def example(tmp_path: Path) -> str:
    root = Path(os.path.realpath(tmp_path)) / "coffee-roastery"
    shutil.copytree(EXAMPLE, root)
    return str(root)


@pytest.mark.parametrize(
    "concept_id",
    [
        "newdir/" + "b" * 253,  # 256-byte file name in a new folder: the wedge
        "b" * 253,  # the same at the root
        "x" * 256 + "/note",  # a folder name over 255 bytes
        "/".join(["é" * 120] * 18) + "/n",  # 2,180 characters but over 4096 bytes
        "a:b",
        "tab\there",
        " lead",
        "ctrl\x85c1",
    ],
)
def test_a_name_the_file_system_or_loader_would_refuse_is_refused_before_staging(
    example: str, concept_id: str
) -> None:
    before = tree(example)
    out = Dispatcher(ServeConfig(bundles=(example,))).call(
        "write_concept",
        {"concept_id": concept_id, "frontmatter": "type: Note\n", "body": "x\n"},
    )
    assert out.is_error
    assert out.structured["code"] == "invalid_request", out.structured
    assert tree(example) == before  # byte for byte, and no .bundle-mcp/ either
    # and the bundle still answers every read
    assert not Dispatcher(ServeConfig(bundles=(example,))).call("list_concepts", {}).is_error


UNADDRESSABLE = {
    "notes/line\nbreak.md": "newline",
    "notes/tab\there.md": "tab",
    "notes/back\\slash.md": "backslash",
    "notes/co:lon.md": "colon",
    " leading.md": "leading space",
    "trailing .md": "trailing space",
    "notes/c1\x85.md": "C1 control",
}


@pytest.fixture
def odd_bundle(tmp_bundle: BundleFactory) -> str:
    files: dict[str, str | bytes] = {
        "index.md": "# Root\n",
        "good.md": "---\ntype: Note\ntitle: Good\n---\n# Good\n",
        "notes/fine name.md": "---\ntype: Note\n---\n# Spaces inside are fine\n",
    }
    files.update({p: "---\ntype: Note\n---\n# odd\n" for p in UNADDRESSABLE})
    return tmp_bundle(files)


def test_an_unaddressable_file_is_an_error_naming_it_and_is_never_listed(odd_bundle: str) -> None:
    dispatcher = Dispatcher(ServeConfig(bundles=(odd_bundle,), skip_unparseable=True))
    report = dispatcher.call("validate_bundle", {})
    assert not report.is_error
    assert report.structured["conformance"]["conformant"] is False
    named = {
        d["file"]: d for d in report.structured["diagnostics"] if d["code"] == "invalid_concept_id"
    }
    assert set(named) == set(UNADDRESSABLE)
    for diagnostic in named.values():
        assert diagnostic["severity"] == "ERROR"
        assert "rename the file" in diagnostic["message"]

    listed = dispatcher.call("list_concepts", {})
    assert not listed.is_error
    ids = [c["id"] for c in listed.structured["concepts"]]
    assert ids == ["good", "notes/fine name"]
    for concept_id in ids:  # every listed ID is addressable by every tool that takes one
        for tool, args in (
            ("read_concept", {"concept_id": concept_id}),
            ("get_neighbors", {"concept_id": concept_id}),
            ("fetch_slice", {"entity_id": concept_id}),
            ("expand_neighbors", {"entity_ids": [concept_id]}),
                ("query_subgraph", {"seed_ids": [concept_id]}),
        ):
            out = dispatcher.call(tool, args)
            assert not out.is_error, (tool, concept_id, out.structured)


def test_without_skip_unparseable_the_unaddressable_file_is_named_in_the_refusal(
    odd_bundle: str,
) -> None:
    out = Dispatcher(ServeConfig(bundles=(odd_bundle,))).call("list_concepts", {})
    assert out.is_error and out.structured["code"] == "operation_rejected"
    files = {d["file"] for d in out.structured["diagnostics"] if d["file"]}
    assert files == set(UNADDRESSABLE)


def test_validate_cli_fails_on_an_unaddressable_file(odd_bundle: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bundle_mcp.cli", "validate", odd_bundle, "--format", "json"],
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 1, done.stderr.decode()
    report = json.loads(done.stdout)
    assert sum(d["code"] == "invalid_concept_id" for d in report["diagnostics"]) == len(
        UNADDRESSABLE
    )


def test_validate_cli_reports_a_stuck_write_and_reads_still_work(example: str) -> None:
    state = Path(example, ".bundle-mcp")
    state.mkdir()
    (state / "journal.json").write_text('{"version": 2, "state": "publishing"}')
    done = subprocess.run(
        [sys.executable, "-m", "bundle_mcp.cli", "validate", example],
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 1, done.stderr.decode()
    out = done.stdout.decode()
    assert "pending_write_unresolved" in out and ".bundle-mcp/journal.json" in out
    assert "To recover:" in out
    dispatcher = Dispatcher(ServeConfig(bundles=(example,)))
    assert not dispatcher.call("list_concepts", {}).is_error
    assert not dispatcher.call("search_concepts", {"query": "roast"}).is_error
    write = dispatcher.call(
        "write_concept", {"concept_id": "n", "frontmatter": "type: Note\n", "body": "x\n"}
    )
    assert write.is_error and write.structured["code"] == "operation_rejected"
