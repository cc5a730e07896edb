"""No placeholder hosts in what the project says about itself.

The project's home is not known, so the README, docs, source, action and hooks say "this
repository" and use relative or local forms. Bundle content used as fixtures (the example bundle,
testdata/, the tests and goldens, the benchmark generator) may keep the reserved documentation
domains (``*.example``, ``example.com``) for its fictional sources: they are content, not links
to the project.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PLACEHOLDER = re.compile(
    r"\b(?:[a-z0-9-]+\.)*example\.(?:com|org|net|invalid)\b"
    r"|\b[a-z0-9-]+\.(?:example|invalid)\b"
    r"|\bbundle-mcp\.dev\b"
    r"|\byour[-_]?(?:org|name|user|username|repo)\b"
    r"|\bOWNER/REPO\b|<owner>|<org>",
    re.IGNORECASE,
)
SKIPPED_DIRS = {"node_modules", "__pycache__", "build", "dist"}
# The contract files' $id base is a made-up host too; see test_contract_ids_use_no_made_up_host.
CONTRACT_ID = re.compile(r'^\s*"\$id": "https://bundle-mcp\.dev/contracts/[a-z0-9_.]+"', re.M)


def _fixture(rel: str) -> bool:
    parts = rel.split("/")
    return (
        parts[0] in ("testdata", "tests")
        or (parts[0] == "examples" and len(parts) > 2)  # inside an example bundle
        or rel == "bench/generate.py"
        # Third-party libraries the viewer inlines, as published (``this.invalid`` is code).
        or rel.startswith("src/bundle_mcp/viewer/vendor/")
    )


def text_files() -> list[tuple[str, str]]:
    found = []
    for folder, dirs, files in os.walk(REPO):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS and not d.endswith(".egg-info")
                         and (not d.startswith(".") or d in (".ci", ".github")))
        for name in sorted(files):
            path = Path(folder) / name
            data = path.read_bytes()
            if b"\0" in data:
                continue
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                continue
            found.append((path.relative_to(REPO).as_posix(), text))
    return found


def test_the_walk_sees_the_files_that_speak_for_the_project() -> None:
    seen = {rel for rel, _ in text_files()}
    for rel in ("README.md", "docs/DECISIONS.md", "docs/decisions/service.md", "pyproject.toml",
                "action.yml", ".pre-commit-hooks.yaml", "src/bundle_mcp/validate_cli.py"):
        assert rel in seen, rel


def test_no_placeholder_hosts_outside_fixture_content() -> None:
    hits = []
    for rel, text in text_files():
        if _fixture(rel):
            continue
        if rel.startswith("contracts/"):
            text = CONTRACT_ID.sub("", text)
        for n, line in enumerate(text.splitlines(), 1):
            for m in PLACEHOLDER.finditer(line):
                hits.append(f"{rel}:{n}: {m.group(0)}")
    assert hits == []


def test_the_sarif_log_names_no_home_page(monkeypatch: pytest.MonkeyPatch) -> None:
    from bundle_mcp import validate_cli

    monkeypatch.chdir(REPO)
    monkeypatch.delenv("GITHUB_WORKSPACE", raising=False)
    parser = argparse.ArgumentParser()
    validate_cli.add_arguments(parser)
    out = io.StringIO()
    validate_cli.run(parser.parse_args(["testdata/bundles/loader-status", "--format", "sarif"]),
                     out=out)
    log = json.loads(out.getvalue())
    urls = set(re.findall(r"https?://[^\s\"]+", out.getvalue()))
    assert urls == {log["$schema"]}  # the SARIF schema's public address, nothing else


def test_contract_ids_use_no_made_up_host() -> None:
    ids = [json.loads(p.read_text("utf-8")).get("$id", "")
           for p in sorted((REPO / "contracts").glob("*.json"))]
    assert not [i for i in ids if "bundle-mcp.dev" in i]
