"""The real Mermaid parser under Node and jsdom, for every test that checks Mermaid text.

``parser_script`` installs ``mermaid`` and ``jsdom`` from the npm registry into a temporary
folder (about 30 s; once per test session through the ``mermaid_parser`` fixture of conftest.py)
and writes a Node script beside them that runs ``mermaid.parse`` on a JSON list of diagrams. It
skips, saying why, when node or npm is missing or the install fails (offline). Set
``BUNDLE_MCP_MERMAID_PREFIX`` to a folder that already holds both packages to reuse an install.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

PREFIX_ENV = "BUNDLE_MCP_MERMAID_PREFIX"

_PARSE = r"""
import { JSDOM } from 'jsdom';
import { readFileSync } from 'node:fs';
const dom = new JSDOM('<!doctype html><html><body></body></html>');
globalThis.window = dom.window;
globalThis.document = dom.window.document;
const { default: mermaid } = await import('mermaid');
mermaid.initialize({ startOnLoad: false });
const texts = JSON.parse(readFileSync(0, 'utf8'));
const out = [];
for (const text of texts) {
  try {
    const parsed = await mermaid.parse(text);
    out.push({ ok: true, type: parsed.diagramType });
  } catch (error) {
    out.push({ ok: false, error: String((error && error.message) || error).slice(0, 500) });
  }
}
process.stdout.write(JSON.stringify(out));
"""


def parser_script(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Node script that parses a JSON list of diagrams, with mermaid installed beside it."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.skip("node and npm are not on PATH: the Mermaid parser check needs them")
    reuse = os.environ.get(PREFIX_ENV)
    prefix = Path(reuse) if reuse else tmp_path_factory.mktemp("mermaid")
    if not (prefix / "node_modules" / "mermaid").is_dir():
        try:
            subprocess.run(
                [
                    npm,
                    "install",
                    "--prefix",
                    str(prefix),
                    "--no-audit",
                    "--no-fund",
                    "--loglevel=error",
                    "mermaid@11",
                    "jsdom@29",
                ],
                check=True,
                capture_output=True,
                timeout=300,
            )
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
            pytest.skip(f"could not install mermaid from the npm registry (offline?): {exc}")
    script = prefix / "parse.mjs"
    script.write_text(_PARSE, encoding="utf-8")
    return script


def parse_all(script: Path, texts: list[str]) -> list[dict[str, Any]]:
    """``{"ok": true, "type": ...}`` or ``{"ok": false, "error": ...}`` for each diagram."""
    done = subprocess.run(
        ["node", str(script)],
        input=json.dumps(texts),
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
        cwd=script.parent,
    )
    result: list[dict[str, Any]] = json.loads(done.stdout)
    return result
