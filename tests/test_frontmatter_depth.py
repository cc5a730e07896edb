"""The nesting cap of plain frontmatter, at its edge: the fast path that takes string scalars
without a call of their own must refuse exactly what the node-by-node walk refuses."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from bundle_mcp.loader.frontmatter import MAX_NESTING, FrontmatterError
from bundle_mcp.loader.strict_yaml import load_yaml


def _nested(levels: int, leaf: str) -> str:
    """``levels`` mappings inside each other (flow style), the innermost holding ``leaf``."""
    return "a: " + "{b: " * (levels - 1) + leaf + "}" * (levels - 1) + "\n"


def _sequence(levels: int, leaf: str) -> str:
    return "a: " + "[" * (levels - 1) + leaf + "]" * (levels - 1) + "\n"


@pytest.mark.parametrize("shape", [_nested, _sequence])
@pytest.mark.parametrize("leaf", ["text", "7", "{}", "[]", "{c: d}", "[x, y]"])
def test_the_deepest_allowed_value_loads_and_one_more_level_is_refused(
    shape: Callable[[int, str], str], leaf: str
) -> None:
    # The top-level mapping is depth 0, its value depth 1: MAX_NESTING levels reach the cap.
    value = load_yaml(shape(MAX_NESTING - 1, leaf), 1)
    assert isinstance(value, dict) and "a" in value
    with pytest.raises(FrontmatterError) as refused:
        load_yaml(shape(MAX_NESTING + 1, leaf), 1)
    assert refused.value.code == "invalid_yaml_graph"
    assert f"deeper than {MAX_NESTING} levels" in refused.value.message


@pytest.mark.parametrize("shape", [_nested, _sequence])
@pytest.mark.parametrize(("leaf", "loads"), [
    ("text", True), ("7", True), ("{}", True), ("[]", True),
    ("[x]", False), ("{c: d}", False),
])
def test_the_edge_of_the_cap(shape: Callable[[int, str], str], leaf: str, loads: bool) -> None:
    """Exactly at the cap the leaf sits at depth MAX_NESTING: a scalar or an empty container
    loads; anything inside it would be one level too deep."""
    text = shape(MAX_NESTING, leaf)
    if loads:
        assert isinstance(load_yaml(text, 1), dict)
    else:
        with pytest.raises(FrontmatterError) as refused:
            load_yaml(text, 1)
        assert refused.value.code == "invalid_yaml_graph"
