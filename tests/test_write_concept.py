"""write_concept: validated before writing, atomic, replayable, body kept byte for byte."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from jsonschema import Draft202012Validator

from bundle_mcp.cancel import CancelToken
from bundle_mcp.contracts import ContractSet
from bundle_mcp.errors import (
    INVALID_REQUEST,
    OPERATION_REJECTED,
    RESOURCE_LIMIT,
    REVISION_CONFLICT,
    BundleError,
    FileMoved,
)
from bundle_mcp.loader import load_bundle
from bundle_mcp.tools import write_concept
from toolcall import run_tool

if TYPE_CHECKING:  # fixtures' types only; pytest provides the objects
    from conftest import BundleFactory

CONTRACTS = ContractSet()
BUNDLE = {
    "index.md": "# Notes\n\n- [Cache](cache.md)\n",
    "cache.md": "---\ntype: Note\ntitle: Cache\n---\n# Cache\n\nOld policy.\n",
    "broken.md": "---\ntype: [unclosed\n---\nbody\n",
}


def call(root: str, **params: Any) -> dict[str, Any]:
    """Run the tool as the dispatcher will: on a fresh snapshot, with the resolved bundle path."""
    snapshot = load_bundle(root)[0]
    result = run_tool(write_concept, snapshot, params, CancelToken(), bundle_path=root)
    CONTRACTS.check_output(write_concept.NAME, result)
    return result


def files(root: str) -> dict[str, bytes]:
    out = {}
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".bundle-mcp"]
        for name in names:
            full = os.path.join(folder, name)
            out[os.path.relpath(full, root)] = Path(full).read_bytes()
    return out


@pytest.fixture
def bundle(tmp_bundle: BundleFactory) -> str:
    return tmp_bundle(BUNDLE)


def test_a_new_concept_is_created_in_a_new_folder(bundle: str) -> None:
    result = call(
        bundle, concept_id="ops/runbooks/restart", frontmatter="type: Runbook\n", body="# Restart\n"
    )
    assert result["status"] == "success"
    assert result["path"] == "ops/runbooks/restart.md"
    assert Path(bundle, "ops/runbooks/restart.md").read_bytes() == (
        b"---\ntype: Runbook\n---\n# Restart\n"
    )
    snapshot = load_bundle(bundle)[0]
    assert "ops/runbooks/restart" in snapshot.concepts
    assert result["result_revision"] == "sha256:" + snapshot.revision
    assert result["base_revision"] != result["result_revision"]


def test_the_body_is_written_byte_for_byte(bundle: str) -> None:
    body = "\ufeff# Cache\r\n\r\ntrailing  \n---\nnot frontmatter\n\tü\u2028end"
    call(bundle, concept_id="cache", frontmatter="type: Note\r\ntitle: Cache", body=body)
    data = Path(bundle, "cache.md").read_bytes()
    assert data == b"---\ntype: Note\ntitle: Cache\n---\n" + body.encode("utf-8")
    doc = load_bundle(bundle)[0].concepts["cache"]
    assert doc.body == body
    assert doc.frontmatter_raw == "type: Note\ntitle: Cache\n"


def test_the_same_request_replays_the_same_success_without_writing(bundle: str) -> None:
    args = {"concept_id": "cache", "frontmatter": "type: Note\n", "body": "New policy.\n"}
    first = call(bundle, **args)
    inode = os.stat(os.path.join(bundle, "cache.md")).st_ino
    again = call(bundle, **args)
    assert again == first
    assert os.stat(os.path.join(bundle, "cache.md")).st_ino == inode


def test_identical_content_from_another_request_is_a_success_without_change(bundle: str) -> None:
    before = files(bundle)
    result = call(
        bundle,
        concept_id="cache",
        frontmatter="type: Note\ntitle: Cache",
        body="# Cache\n\nOld policy.\n",
    )
    assert result["base_revision"] == result["result_revision"]
    assert files(bundle) == before


def test_replacing_a_broken_file_repairs_it(bundle: str) -> None:
    call(bundle, concept_id="broken", frontmatter="type: Note\n", body="fixed\n")
    assert load_bundle(bundle)[0].broken == ()


@pytest.mark.parametrize(
    ("frontmatter", "code", "finding"),
    [
        ("title: No type\n", OPERATION_REJECTED, "missing_type"),
        ("type: ''\n", OPERATION_REJECTED, "missing_type"),
        ("", OPERATION_REJECTED, "missing_type"),
        ("- a list\n", OPERATION_REJECTED, "invalid_frontmatter"),
        ("type: [unclosed\n", OPERATION_REJECTED, "invalid_frontmatter"),
        ("type: a\ntype: b\n", OPERATION_REJECTED, "invalid_frontmatter"),
        ("type: Note\n---\ntitle: x\n", OPERATION_REJECTED, "frontmatter_fence"),
        ("type: Note\nx: " + "y" * (1 << 20) + "\n", RESOURCE_LIMIT, "resource_limit"),
    ],
    ids=["no-type", "empty-type", "empty", "list", "bad-yaml", "duplicate-key", "fence", "huge"],
)
def test_a_rejected_write_changes_nothing(
    bundle: str, frontmatter: str, code: str, finding: str
) -> None:
    before = files(bundle)
    with pytest.raises(BundleError) as caught:
        call(bundle, concept_id="cache", frontmatter=frontmatter, body="# Cache\n")
    assert caught.value.code == code
    assert finding in {d.code for d in caught.value.diagnostics}
    assert files(bundle) == before
    assert not os.path.exists(os.path.join(bundle, ".bundle-mcp"))


@pytest.mark.parametrize(
    "concept_id", ["a/../b", "index", "notes/log", ".hidden/x", " a", "a.md", "a//b", "x:y"]
)
def test_a_non_canonical_id_is_an_invalid_request(bundle: str, concept_id: str) -> None:
    before = files(bundle)
    with pytest.raises(BundleError) as caught:
        call(bundle, concept_id=concept_id, frontmatter="type: Note\n", body="")
    assert caught.value.code == INVALID_REQUEST
    assert files(bundle) == before


def test_unpaired_surrogates_are_an_invalid_request(bundle: str) -> None:
    with pytest.raises(BundleError) as caught:
        call(bundle, concept_id="cache", frontmatter="type: Note\n", body="bad \ud800\n")
    assert caught.value.code == INVALID_REQUEST


def test_a_bundle_that_moved_on_since_the_snapshot_is_a_conflict(bundle: str) -> None:
    snapshot = load_bundle(bundle)[0]
    Path(bundle, "index.md").write_text("# Notes, edited by a person\n", "utf-8")
    params = {"concept_id": "cache", "frontmatter": "type: Note\n", "body": "mine\n"}
    with pytest.raises(BundleError) as caught:
        run_tool(write_concept, snapshot, params, CancelToken(), bundle_path=bundle)
    assert caught.value.code == REVISION_CONFLICT
    assert Path(bundle, "cache.md").read_text("utf-8").endswith("Old policy.\n")


def test_the_written_file_changed_since_the_snapshot_writes_nothing(bundle: str) -> None:
    """The snapshot's text of the file is read back from the file (packed_text.FileText): once
    a person changed it, the tool cannot plan against the snapshot and stops before writing
    (through the dispatcher, the call is answered again from a new capture)."""
    snapshot = load_bundle(bundle)[0]
    Path(bundle, "cache.md").write_text("---\ntype: Note\n---\nedited by a person\n", "utf-8")
    params = {"concept_id": "cache", "frontmatter": "type: Note\n", "body": "mine\n"}
    with pytest.raises(FileMoved):
        run_tool(write_concept, snapshot, params, CancelToken(), bundle_path=bundle)
    assert Path(bundle, "cache.md").read_text("utf-8").endswith("edited by a person\n")


def test_guidance_on_the_new_file_comes_back_as_diagnostics(bundle: str) -> None:
    result = call(
        bundle, concept_id="cache", frontmatter="type: Note\nstatus: archived\n", body="# Cache\n"
    )
    assert [(d["severity"], d["file"]) for d in result["diagnostics"]] == [("WARN", "cache.md")]


def test_the_input_contract_matches_the_reference_shape() -> None:
    schema = Draft202012Validator(CONTRACTS.input_schema(write_concept.NAME))
    ok = {"bundle_path": "/srv/b", "concept_id": "a/b", "frontmatter": "type: x\n", "body": ""}
    assert schema.is_valid(ok)
    assert schema.is_valid({k: v for k, v in ok.items() if k != "bundle_path"})
    for missing in ("concept_id", "frontmatter", "body"):
        assert not schema.is_valid({k: v for k, v in ok.items() if k != missing})
    assert not schema.is_valid({**ok, "extra": 1})
    assert not schema.is_valid({**ok, "concept_id": "a/index"})
    assert not schema.is_valid({**ok, "frontmatter": "x" * ((1 << 20) + 1)})
