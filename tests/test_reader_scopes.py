"""Reader scopes hold whatever a call names (issue 25, items 1–3).

1. A call cannot take a folder of a served bundle for a bundle of its own: ``serve`` refuses
   ``--readers`` with ``--allow-any-bundle`` or with one BUNDLE inside another, and a
   dispatcher built that way anyway refuses every scoped reader's call.
2. A write outside the reader's writable folders is refused before anything else: before the
   revision is compared, before ``.bundle-mcp/`` or its lock exists.
3. A preview applies the same scope as its apply: it answers its contract's rejected shape and
   names the folders the reader may write (write scope within read scope), no file.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bundle_mcp.dispatch import Dispatcher, ServeConfig
from bundle_mcp.okf.scopes import NOTHING, Access, FolderScope
from bundle_mcp.readers import ALL_READER, Reader, hash_token

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "coffee-roastery"
STALE = "sha256:" + "0" * 64


def _reader(read: list[str], write: list[str] | None = None) -> Reader:
    return Reader("r", Access(FolderScope.of(read), FolderScope.of(write) if write else NOTHING))


def _call(dispatcher: Dispatcher, bundle: Path | str, reader: Reader, tool: str,
          **arguments: Any) -> dict[str, Any]:
    outcome = dispatcher.call(tool, {"bundle_path": str(bundle), **arguments}, None, reader)
    return {"is_error": outcome.is_error, "text": outcome.text, **outcome.structured}


@pytest.fixture
def roastery(tmp_path: Path) -> Path:
    root = Path(os.path.realpath(tmp_path)) / "roastery"
    shutil.copytree(EXAMPLE, root)
    return root


def _write(root: Path, files: dict[str, str]) -> Path:
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text, encoding="utf-8")
    return root


@pytest.fixture
def dated(tmp_path: Path) -> Path:
    """An OKF 0.2 bundle with a date in two folders (for the temporal upgrade)."""
    return _write(Path(os.path.realpath(tmp_path)) / "dated", {
        "index.md": '---\nokf_version: "0.2"\n---\n# Roastery\n',
        "beans/guji.md": "---\ntype: Green Coffee\ntitle: Guji\nstale_after: 2026-06-01\n---\n"
                         "# Guji\n",
        "glossary/quakers.md": "---\ntype: Glossary Term\ntitle: Quakers\n"
                               "stale_after: 2026-07-01\n---\n# Quakers\n",
    })


@pytest.fixture
def legacy(tmp_path: Path) -> Path:
    """An OKF v0.1 bundle (timestamps) with concepts in two folders (for the migration)."""
    return _write(Path(os.path.realpath(tmp_path)) / "legacy", {
        "index.md": "# Roastery\n\n- [Guji](beans/guji.md)\n",
        "beans/guji.md": "---\ntype: Green Coffee\ntitle: Guji\n"
                         "timestamp: 2024-05-01T10:00:00Z\n---\n# Guji\n",
        "glossary/quakers.md": "---\ntype: Glossary Term\ntitle: Quakers\n"
                               "timestamp: 2024-05-02T10:00:00Z\n---\n# Quakers\n",
    })


# ------------------------------------------------------------------ 1. bundle paths and scopes


def test_a_scoped_reader_cannot_name_a_subfolder_as_its_bundle(roastery: Path) -> None:
    """The issue's reproduction: a reader of the root's own files named ``pricing`` as a bundle
    and read its concepts as root files. The dispatcher now refuses the call outright."""
    root_only = _reader(["/"])
    dispatcher = Dispatcher(ServeConfig(allow_any_bundle=True))
    for tool, arguments in (("list_concepts", {}),
                            ("read_concept", {"concept_id": "landed-cost"})):
        answer = _call(dispatcher, roastery / "pricing", root_only, tool, **arguments)
        assert answer["is_error"] and answer["code"] == "operation_rejected", answer
        assert "landed" not in answer["text"]
        # Not even the bundle it was meant for: the configuration cannot hold scopes at all.
        assert _call(dispatcher, roastery, root_only, "list_concepts")["is_error"]
    # The all-reading reader of a server without readers keeps --allow-any-bundle.
    everything = _call(dispatcher, roastery / "pricing", ALL_READER, "list_concepts")
    assert not everything["is_error"]


def test_nested_bundles_refuse_every_scoped_reader(roastery: Path) -> None:
    dispatcher = Dispatcher(ServeConfig(bundles=(str(roastery), str(roastery / "pricing"))))
    for bundle in (roastery, roastery / "pricing"):
        answer = _call(dispatcher, bundle, _reader(["/"]), "list_concepts")
        assert answer["is_error"] and answer["code"] == "operation_rejected", answer
    assert ServeConfig(bundles=(str(roastery), str(roastery / "pricing"))).scopes_problem()
    # Siblings, or a name that merely starts the same, are not nested.
    assert ServeConfig(bundles=(str(roastery / "pricing"), str(roastery / "pricing2"),
                                str(roastery / "beans"))).scopes_problem() is None


def _serve(*arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bundle_mcp.cli", "serve", *arguments],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120, check=False,
    )


@pytest.fixture
def readers_file(tmp_path: Path) -> Path:
    path = tmp_path / "readers.toml"
    path.write_text(f'[[readers]]\nname = "front"\ntokens = ["{hash_token("t-0123456789")}"]\n'
                    'read = ["/"]\n', encoding="utf-8")
    return path


@pytest.mark.parametrize("extra", [
    ("--allow-any-bundle",),
    ("--allow-any-bundle", "--http", "127.0.0.1:0"),
    ("--allow-any-bundle", "--reader", "front"),
    ("NESTED",),
    ("NESTED", "--http", "127.0.0.1:0"),
])
def test_serve_refuses_readers_where_scopes_cannot_hold(
    roastery: Path, readers_file: Path, extra: tuple[str, ...]
) -> None:
    bundles = [str(roastery)]
    if extra[0] == "NESTED":
        bundles.append(str(roastery / "pricing"))
        extra = extra[1:]
    done = _serve(*bundles, "--readers", str(readers_file), *extra)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("bundle-mcp: "), done.stderr
    assert ("--allow-any-bundle" in lines[0]) is ("--allow-any-bundle" in extra)


def test_serve_help_says_so() -> None:
    done = subprocess.run([sys.executable, "-m", "bundle_mcp.cli", "serve", "--help"],
                          capture_output=True, text=True, timeout=120, check=True)
    text = " ".join(done.stdout.split())
    assert "Not with --allow-any-bundle, nor with one BUNDLE inside another" in text
    assert "not with --readers" in text


# ------------------------------------------------------------------ 2. scope before revision


def _no_state(bundle: Path) -> None:
    assert not (bundle / ".bundle-mcp").exists(), sorted(os.listdir(bundle / ".bundle-mcp"))


def test_a_stale_patch_outside_the_scope_is_refused_before_the_revision(roastery: Path) -> None:
    """The issue's reproduction: write = ["beans"], a patch on glossary/… with a stale
    expected_revision answered revision_conflict and created .bundle-mcp/lock."""
    beans = _reader(["**"], ["beans"])
    dispatcher = Dispatcher(ServeConfig(bundles=(str(roastery),)))
    answer = _call(dispatcher, roastery, beans, "apply_concept_patch", actor="t",
                   operations=[{"kind": "set_lifecycle", "concept_id": "glossary/quakers",
                                "lifecycle": {"status": "stable", "stale_after": "2027-01-01"}}],
                   expected_revision=STALE, expected_plan_digest=STALE)
    assert answer["is_error"] and answer["code"] == "operation_rejected", answer
    assert "writable folders: beans" in answer["text"] + str(answer["diagnostics"])
    _no_state(roastery)
    # Inside the scope the same stale call is a conflict, as before.
    inside = _call(dispatcher, roastery, beans, "apply_concept_patch", actor="t",
                   operations=[{"kind": "set_lifecycle", "concept_id": "beans/ethiopia-guji",
                                "lifecycle": {"status": "stable", "stale_after": "2027-01-01"}}],
                   expected_revision=STALE, expected_plan_digest=STALE)
    assert inside["code"] == "revision_conflict", inside


def test_every_apply_checks_the_scope_first(dated: Path, legacy: Path) -> None:
    beans = _reader(["**"], ["beans"])
    upgrade = Dispatcher(ServeConfig(bundles=(str(dated),)))
    answer = _call(upgrade, dated, beans, "apply_temporal_upgrade", id="u1", actor="t",
                   mappings=[{"concept": "glossary/quakers", "path": "stale_after",
                              "from": "2026-07-01", "to": "2026-07-01T00:00:00Z"}],
                   base_revision=STALE, plan_digest=STALE)
    assert answer["is_error"] and answer["code"] == "operation_rejected", answer
    _no_state(dated)

    # The migration's writes are the ones its proof lists: reviewed by the all-reader, applied
    # by a reader that may write beans only, after the bundle moved on.
    migrate = Dispatcher(ServeConfig(bundles=(str(legacy),)))
    request = {"timestamp_policy": "preserve", "generated_by": "t", "citation_mappings": []}
    preview = _call(migrate, legacy, ALL_READER, "preview_v02_migration", **request)
    assert preview["status"] == "applicable", preview
    (legacy / "beans/guji.md").write_text(
        (legacy / "beans/guji.md").read_text("utf-8") + "\nMoved on.\n", "utf-8")
    answer = _call(migrate, legacy, beans, "apply_v02_migration", **request,
                   expected_source=preview["source"], proof=preview["proof"],
                   expected_plan_digest=preview["plan_digest"])
    assert answer["is_error"] and answer["code"] == "operation_rejected", answer
    _no_state(legacy)

    written = _call(migrate, legacy, beans, "write_concept", concept_id="glossary/new",
                    frontmatter="type: Note\ntitle: New\nbroken: [", body="# New\n")
    assert written["is_error"] and written["code"] == "operation_rejected", written
    _no_state(legacy)


# ------------------------------------------------------------------ 3. previews


def test_a_preview_outside_the_scope_is_rejected_naming_the_writable_folders(
    roastery: Path,
) -> None:
    """The issue's reproduction: the preview answered applicable with a plan digest."""
    dispatcher = Dispatcher(ServeConfig(bundles=(str(roastery),)))
    operations = [{"kind": "set_lifecycle", "concept_id": "glossary/quakers",
                   "lifecycle": {"status": "stable", "stale_after": "2027-01-01"}}]
    # Writes beans and reports, reads beans and glossary: it may write beans only.
    reader = _reader(["beans", "glossary", "/"], ["beans", "reports"])
    answer = _call(dispatcher, roastery, reader, "preview_concept_patch", actor="t",
                   operations=operations)
    assert not answer["is_error"], answer
    assert answer["status"] == "rejected" and answer["plan_digest"] is None, answer
    assert answer["result_revision"] is None and answer["affected_paths"] == []
    [diagnostic] = answer["diagnostics"]
    assert diagnostic["code"] == "operation_rejected" and diagnostic["severity"] == "ERROR"
    assert diagnostic["message"].endswith("writable folders: beans"), diagnostic
    assert diagnostic["file"] is None and "reports" not in answer["text"]
    # A concept the reader cannot even read is refused alike, naming nothing of it.
    hidden = _call(dispatcher, roastery, reader, "preview_concept_patch", actor="t",
                   operations=[{**operations[0], "concept_id": "pricing/landed-cost"}])
    absent = _call(dispatcher, roastery, reader, "preview_concept_patch", actor="t",
                   operations=[{**operations[0], "concept_id": "pricing/no-such-thing"}])
    assert hidden["status"] == absent["status"] == "rejected"
    assert hidden["diagnostics"] == absent["diagnostics"] == answer["diagnostics"]
    # Inside the scope the preview plans as before.
    inside = _call(dispatcher, roastery, reader, "preview_concept_patch", actor="t",
                   operations=[{**operations[0], "concept_id": "beans/ethiopia-guji"}])
    assert inside["status"] == "applicable", inside


def test_every_preview_applies_its_applys_scope(dated: Path, legacy: Path) -> None:
    beans = _reader(["**"], ["beans"])
    upgrade = Dispatcher(ServeConfig(bundles=(str(dated),)))
    guji = {"concept": "beans/guji", "path": "stale_after", "from": "2026-06-01",
            "to": "2026-06-01T00:00:00Z"}
    quakers = {"concept": "glossary/quakers", "path": "stale_after", "from": "2026-07-01",
               "to": "2026-07-01T00:00:00Z"}
    for mappings in ([guji, quakers], [guji], []):
        # Named outside, or left unresolved outside (it would have to be mapped to be ready).
        answer = _call(upgrade, dated, beans, "preview_temporal_upgrade", id="u1", actor="t",
                       mappings=mappings)
        assert answer["is_error"] and answer["code"] == "operation_rejected", answer
        assert "writable folders: beans" in str(answer["diagnostics"])
    both = _reader(["**"], ["beans", "glossary"])
    ready = _call(upgrade, dated, both, "preview_temporal_upgrade", id="u1", actor="t",
                  mappings=[guji, quakers])
    assert ready["status"] == "ready", ready

    migrate = Dispatcher(ServeConfig(bundles=(str(legacy),)))
    request = {"timestamp_policy": "preserve", "generated_by": "t", "citation_mappings": []}
    blocked = _call(migrate, legacy, beans, "preview_v02_migration", **request)
    assert not blocked["is_error"] and blocked["status"] == "blocked", blocked
    assert blocked["plan_digest"] is None and blocked["proof"] is None
    [blocker] = blocked["blockers"]
    assert blocker["code"] == "operation_rejected" and blocker["path"] == ""
    assert blocker["message"].endswith("writable folders: beans")
    everything = _call(migrate, legacy, _reader(["**"], ["**"]), "preview_v02_migration",
                       **request)
    assert everything["status"] == "applicable", everything


@pytest.mark.parametrize(("read", "write", "writable"), [
    (["finance", "glossary", "/"], ["finance/drafts"], ("finance/drafts",)),
    (["**"], ["beans"], ("beans",)),
    (["finance", "glossary", "/"], ["**"], ("/", "finance", "glossary")),
    (["beans", "glossary"], ["beans", "reports"], ("beans",)),
    (["teams/a"], ["teams/*/public"], ("teams/a/public",)),
    (["teams/*/public"], ["teams"], ("teams/*/public",)),
    (["finance"], ["finance", "finance/q3"], ("finance",)),
    (["glossary"], ["beans", "/"], ()),
])
def test_the_writable_folders_are_the_write_scope_within_the_read_scope(
    read: list[str], write: list[str], writable: tuple[str, ...]
) -> None:
    access = Access(FolderScope.of(read), FolderScope.of(write))
    assert access.writable_patterns() == writable
    for folder in ("beans", "finance/drafts", "finance/q3", "teams/a/public", "teams/b/public",
                   "reports", "glossary", ""):
        path = f"{folder}/x.md" if folder else "x.md"
        named = any(FolderScope.of([p]).reads_file(path) for p in writable)
        assert named is access.may_write(path), (folder, writable)
