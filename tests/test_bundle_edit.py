"""Bundle edits keep every link whole: renames and deletions at random in generated bundles.

The property (issue 28): after any applied sequence of renames and deletions (``inbound:
unlink``), the set of resolved references (Markdown links from every document, index files
included, and typed relations), read through the renames, is the set before less the
references to and from the deleted concepts; and no link is broken (the ``--check-links``
rule). Each edit goes through the real dispatcher: preview, then apply with its revision and
digest. ``test_renames_and_deletions_keep_links`` runs 20 examples (``make test``); the slow
variant 150 (20 under ``HYPOTHESIS_PROFILE=ci``).

The unit tests below pin the rules the property does not reach: a link's style and fragment, a
link the parser reads but that is written with escapes, log and index placement.
"""

from __future__ import annotations

import os
import posixpath
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bundle_mcp.contracts import ContractSet
from bundle_mcp.dispatch import Dispatcher, ServeConfig
from bundle_mcp.loader import load_bundle
from bundle_mcp.model import Document, Snapshot
from bundle_mcp.tools import load_tools
from bundle_mcp.validation.links import broken_links, link_target

FOLDERS = ("", "a", "a/b", "c")
STYLES = ("rel", "rel_nomd", "dotrel", "abs", "abs_frag", "abs_nomd")
_PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "dev")
CONTRACTS = ContractSet()  # compiling contracts is the slow part of a dispatcher: share one
TOOLS = load_tools(("preview_bundle_edit", "apply_bundle_edit"))


def dispatcher_for(root: Path) -> Dispatcher:
    return Dispatcher(ServeConfig(bundles=(str(root),)), CONTRACTS, tools=TOOLS)


def destination(style: str, source: str, target: str) -> str:
    rel = posixpath.relpath(target, posixpath.dirname(source) or ".")
    return {
        "rel": rel,
        "rel_nomd": rel[:-3],
        "dotrel": rel if rel.startswith("..") else "./" + rel,
        "abs": "/" + target,
        "abs_frag": "/" + target + "#intro",
        "abs_nomd": "/" + target[:-3],
    }[style]


@st.composite
def bundles(draw: Any) -> dict[str, str]:
    count = draw(st.integers(2, 7))
    paths = [f"{draw(st.sampled_from(FOLDERS))}/n{i}.md".lstrip("/") for i in range(count)]
    files: dict[str, str] = {}
    for path in paths:
        targets = draw(st.lists(st.sampled_from(paths), max_size=4))
        links = " ".join(
            f"[l{n}]({destination(draw(st.sampled_from(STYLES)), path, t)})"
            for n, t in enumerate(targets)
        )
        related = draw(st.lists(st.sampled_from(paths), max_size=2, unique=True))
        relations = "".join(f"    - target: {t[:-3]}\n" for t in related)
        front = "type: Note\n" + (f"relations:\n  related:\n{relations}" if relations else "")
        files[path] = f"---\n{front}---\n# Intro\n\nText with {links}.\n"
    files["index.md"] = "# Index\n\n" + "".join(f"* [{p}]({p})\n" for p in paths)
    return files


def references(snapshot: Snapshot) -> set[tuple[str, str]]:
    """(source path, target concept ID) of every resolved link and relation."""
    out: set[tuple[str, str]] = set()
    for doc in snapshot.documents.values():
        for link in doc.markdown.links:
            reached = link_target(link, snapshot)
            if isinstance(reached, Document) and reached.concept_id is not None:
                out.add((doc.path, reached.concept_id))
        for relation in doc.relations:
            if relation.target_id in snapshot.concepts:
                out.add((doc.path, relation.target_id))
    return out


def broken(snapshot: Snapshot) -> list[str]:
    return [f"{d.path}: {link.raw}" for d in snapshot.documents.values()
            for link in broken_links(d, snapshot)]


def edit(dispatcher: Dispatcher, operations: list[dict[str, Any]]) -> dict[str, Any]:
    preview = dispatcher.call("preview_bundle_edit", {"operations": operations})
    assert not preview.is_error, preview.structured
    assert preview.structured["status"] == "applicable", preview.structured
    applied = dispatcher.call("apply_bundle_edit", {
        "operations": operations, "expected_revision": preview.structured["base_revision"],
        "expected_plan_digest": preview.structured["plan_digest"]})
    assert not applied.is_error, applied.structured
    assert applied.structured["result_revision"] == preview.structured["result_revision"]
    return applied.structured


def _check_random_edits(files: dict[str, str], steps: list[tuple[str, int, str]]) -> None:
    with tempfile.TemporaryDirectory(prefix="bundle-edit-") as tmp:
        root = Path(os.path.realpath(tmp)) / "bundle"
        for path, text in files.items():
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            (root / path).write_text(text, encoding="utf-8")
        snapshot = load_bundle(str(root))[0]
        assert broken(snapshot) == []
        expected = references(snapshot)
        dispatcher = dispatcher_for(root)
        for n, (kind, pick, folder) in enumerate(steps):
            ids = sorted(snapshot.concepts)
            if kind == "delete" and len(ids) < 2:
                continue  # the root index would list nothing: a plan the edit rejects
            concept_id = ids[pick % len(ids)]
            path = concept_id + ".md"
            if kind == "rename":
                new_id = f"{folder}/r{n}".lstrip("/")
                edit(dispatcher, [{"op": "rename", "concept_id": concept_id, "new_id": new_id}])
                new_path = new_id + ".md"
                expected = {(new_path if s == path else s, new_id if t == concept_id else t)
                            for s, t in expected}
            else:
                edit(dispatcher, [{"op": "delete", "concept_id": concept_id,
                                   "inbound": "unlink"}])
                expected = {(s, t) for s, t in expected if path not in (s, t + ".md")}
            snapshot = load_bundle(str(root))[0]
            assert references(snapshot) == expected, (kind, concept_id)
            assert broken(snapshot) == [], (kind, concept_id)


STEPS = st.lists(st.tuples(st.sampled_from(["rename", "rename", "delete"]), st.integers(0, 50),
                           st.sampled_from(FOLDERS + ("new/deep",))), min_size=1, max_size=4)
_SETTINGS = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])


@settings(_SETTINGS, max_examples=20)
@given(files=bundles(), steps=STEPS)
def test_renames_and_deletions_keep_links(files: dict[str, str],
                                          steps: list[tuple[str, int, str]]) -> None:
    _check_random_edits(files, steps)


@pytest.mark.slow
@settings(_SETTINGS, max_examples=20 if _PROFILE == "ci" else 150)
@given(files=bundles(), steps=STEPS)
def test_renames_and_deletions_keep_links_long(files: dict[str, str],
                                               steps: list[tuple[str, int, str]]) -> None:
    _check_random_edits(files, steps)


# ---------------------------------------------------------------------------- single rules


def _bundle(tmp_path: Path, files: dict[str, str]) -> tuple[Path, Dispatcher]:
    root = Path(os.path.realpath(tmp_path)) / "bundle"
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(text.encode("utf-8"))
    return root, dispatcher_for(root)


def test_a_rename_changes_only_the_link_targets_byte_for_byte(tmp_path: Path) -> None:
    """CRLF, a title, an angle-bracket destination, a reference definition and a code span: only
    the destinations that resolve to the concept change."""
    referrer = ("---\r\ntype: Note\r\n---\r\nSee [x](../x.md \"title\"), [y](<./../x.md#part>), "
                "[z][ref] and `[code](../x.md)`.\r\n\r\n[ref]: /x\r\n")
    root, dispatcher = _bundle(tmp_path, {"x.md": "---\ntype: Note\n---\n# X\n",
                                          "dir/r.md": referrer})
    edit(dispatcher, [{"op": "rename", "concept_id": "x", "new_id": "dir/sub/x 2"}])
    assert (root / "dir/r.md").read_bytes().decode() == (
        "---\r\ntype: Note\r\n---\r\nSee [x](sub/x%202.md \"title\"), "
        "[y](<./sub/x%202.md#part>), [z][ref] and `[code](../x.md)`.\r\n\r\n"
        "[ref]: /dir/sub/x%202\r\n")
    assert not (root / "x.md").exists()


def test_the_moved_files_own_relative_links_are_recomputed(tmp_path: Path) -> None:
    root, dispatcher = _bundle(tmp_path, {
        "a/x.md": "---\ntype: Note\nsources:\n  - resource: ../b/y.md\n---\n"
                  "[y](../b/y.md), [abs](/b/y.md), [self](x.md#top), [gone](missing.md)\n",
        "b/y.md": "---\ntype: Note\n---\n# Y\n"})
    edit(dispatcher, [{"op": "rename", "concept_id": "a/x", "new_id": "c/d/x"}])
    assert (root / "c/d/x.md").read_text() == (
        "---\ntype: Note\nsources:\n  - resource: ../../b/y.md\n---\n"
        "[y](../../b/y.md), [abs](/b/y.md), [self](x.md#top), [gone](../../a/missing.md)\n")


def test_an_escaped_link_is_refused_not_guessed(tmp_path: Path) -> None:
    _, dispatcher = _bundle(tmp_path, {"a_b.md": "---\ntype: Note\n---\n# A\n",
                                       "r.md": "---\ntype: Note\n---\n[a](a\\_b.md)\n"})
    preview = dispatcher.call("preview_bundle_edit", {
        "operations": [{"op": "rename", "concept_id": "a_b", "new_id": "c"}]}).structured
    assert preview["status"] == "rejected"
    assert [d["code"] for d in preview["diagnostics"]] == ["link_not_editable"]
    assert preview["diagnostics"][0]["file"] == "r.md"


def test_a_log_entry_joins_its_date_or_a_new_group_newest_first(tmp_path: Path) -> None:
    log = "# Log\n\n## 2026-05-22\n\n- first\n\n## 2026-05-15\n\n- older\n"
    root, dispatcher = _bundle(tmp_path, {"n.md": "---\ntype: Note\n---\n", "log.md": log})
    edit(dispatcher, [
        {"op": "append_log", "folder": "", "date": "2026-05-22", "entry": "second"},
        {"op": "append_log", "folder": "", "date": "2026-05-18", "entry": "between"},
        {"op": "append_log", "folder": "", "date": "2026-06-01", "entry": "newest"},
        {"op": "append_log", "folder": "", "date": "2026-05-15", "entry": "* bulleted already"},
    ])
    assert (root / "log.md").read_text() == (
        "# Log\n\n## 2026-06-01\n\n* newest\n\n## 2026-05-22\n\n- first\n- second\n\n"
        "## 2026-05-18\n\n* between\n\n## 2026-05-15\n\n- older\n- bulleted already\n")


def test_an_index_keeps_the_root_version_and_prose_above_its_lists(tmp_path: Path) -> None:
    index = ('---\nokf_version: "0.2"\n---\n# Knowledge\n\nRead this first.\n\n'
             "## Old group\n\n* [gone](gone.md)\n")
    root, dispatcher = _bundle(tmp_path, {
        "index.md": index,
        "b.md": "---\ntype: Table\ntitle: Beta [v2]\ndescription: The second.\n---\n",
        "a.md": "---\ntype: Table\ntitle: Alpha\n---\n",
        "g/x.md": "---\ntype: Guide\n---\n"})
    edit(dispatcher, [{"op": "regenerate_index", "folder": ""}])
    assert (root / "index.md").read_text() == (
        '---\nokf_version: "0.2"\n---\n# Knowledge\n\nRead this first.\n\n'
        "## Table\n\n* [Alpha](a.md)\n* [Beta \\[v2\\]](b.md) - The second.\n\n"
        "## Folders\n\n* [g](g/)\n")


def test_a_relation_target_keeps_its_fragment_and_its_plain_style(tmp_path: Path) -> None:
    root, dispatcher = _bundle(tmp_path, {
        "x.md": "---\ntype: Note\n---\n# X\n",
        "r.md": "---\ntype: Note  # kept\nrelations:\n  uses:\n    - target: x#part\n"
                "    - target: 'x'\n---\nBody.\n"})
    edit(dispatcher, [{"op": "rename", "concept_id": "x", "new_id": "y/x"}])
    assert (root / "r.md").read_text() == (
        "---\ntype: Note  # kept\nrelations:\n  uses:\n    - target: y/x#part\n"
        "    - target: 'y/x'\n---\nBody.\n")
