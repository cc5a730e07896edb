"""The package's public API is exactly ``bundle_mcp.__all__`` (after httpx's members test)."""

from __future__ import annotations

import ast
import types
from pathlib import Path

import bundle_mcp

SRC = Path(__file__).resolve().parent.parent / "src" / "bundle_mcp"


def test_all_exports_are_exported_and_documented() -> None:
    # Everything public on the package but its submodules is listed.
    public = {
        name
        for name, value in vars(bundle_mcp).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert public <= set(bundle_mcp.__all__)
    assert sorted(bundle_mcp.__all__) == bundle_mcp.__all__
    for name in bundle_mcp.__all__:
        member = getattr(bundle_mcp, name)
        if name == "__version__":
            assert isinstance(member, str)
            continue
        assert member.__module__.startswith("bundle_mcp."), name
        assert member.__doc__, f"{name} has no docstring"


def test_every_module_that_declares_all_lists_only_what_it_defines() -> None:
    for path in sorted(SRC.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        declared: list[str] | None = None
        defined: set[str] = set()
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
            ):
                declared = list(ast.literal_eval(node.value))
            for name in _bound_names(node):
                defined.add(name)
        if declared is None:
            continue
        assert len(declared) == len(set(declared)), path
        missing = sorted(set(declared) - defined)
        assert missing == [], f"{path.relative_to(SRC)}: __all__ names {missing}"


def _bound_names(node: ast.stmt) -> set[str]:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, ast.Assign):
        return {t.id for t in node.targets if isinstance(t, ast.Name)}
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return {node.target.id}
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in node.names}
    if isinstance(node, ast.If):
        return {n for child in node.body + node.orelse for n in _bound_names(child)}
    return set()
