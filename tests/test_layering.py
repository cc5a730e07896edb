"""The package's layers import downwards only: storage below loading and writing, the value
objects below the parsers.

Read from the source (every import statement, a function-level one included), so a lazy import
that would bend a layer is caught before anything runs it. And the journal, moved into storage,
keeps the bytes it was written in.
"""

from __future__ import annotations

import ast
import os
import sys
from pathlib import Path

import pytest

from bundle_mcp.model import canonical_json
from bundle_mcp.storage.journal import (
    STAGING,
    Entry,
    Journal,
    backup_name,
    read_journal,
    staged_name,
    write_journal,
)

SRC = Path(__file__).resolve().parent.parent / "src"
PACKAGE = SRC / "bundle_mcp"
DIGEST = "sha256:" + "c" * 64


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    """Every module ``path`` imports, absolute; ``from . import x`` counts ``x`` as a module."""
    name = _module_name(path)
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            found.add(target)
            found.update(f"{target}.{alias.name}" for alias in node.names)
    return found


def _modules(relative: str) -> list[Path]:
    where = PACKAGE / relative
    return sorted(where.rglob("*.py")) if where.is_dir() else [where]


def _ours(imported: set[str]) -> set[str]:
    return {m for m in imported if m == "bundle_mcp" or m.startswith("bundle_mcp.")}


def _within(module: str, allowed: tuple[str, ...]) -> bool:
    return any(module == a or module.startswith(a + ".") for a in allowed)


@pytest.mark.parametrize("path", _modules("storage"), ids=lambda p: p.name)
def test_storage_depends_only_on_errors_cancel_observe_and_the_standard_library(
    path: Path,
) -> None:
    imported = _imports(path)
    ours = _ours(imported)
    allowed = ("bundle_mcp.storage", "bundle_mcp.errors", "bundle_mcp.cancel",
               "bundle_mcp.observe", "bundle_mcp.limits")
    assert {m for m in ours if not _within(m, allowed)} == set()
    foreign = {m.split(".")[0] for m in imported - ours}
    assert foreign - set(sys.stdlib_module_names) - {"__future__"} == set()


@pytest.mark.parametrize("path", _modules("loader"), ids=lambda p: p.name)
def test_the_loader_never_imports_the_write_path(path: Path) -> None:
    assert {m for m in _ours(_imports(path)) if _within(m, ("bundle_mcp.writes",))} == set()


def test_the_value_objects_import_no_parser() -> None:
    ours = _ours(_imports(PACKAGE / "model.py"))
    assert ours <= {"bundle_mcp.errors", "bundle_mcp.errors.Diagnostic"}


def test_the_journal_on_disk_is_still_canonical_json(tmp_path: Path) -> None:
    """Storage spells out its own encoding; a pending journal must stay readable bytes for bytes
    as the write path wrote it before the split (sorted keys, no whitespace, one newline)."""
    entry = Entry("dir/é.md", "a" * 64, "b" * 64, staged_name("dir/é.md", DIGEST),
                  backup_name("dir/é.md", DIGEST))
    journal = Journal(STAGING, DIGEST, DIGEST, DIGEST, (entry,), ("dir",))
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        write_journal(fd, journal)
        assert read_journal(fd) == journal
    finally:
        os.close(fd)
    on_disk = (tmp_path / "journal.json").read_bytes()
    assert on_disk == canonical_json(journal.to_json()).encode("utf-8") + b"\n"
