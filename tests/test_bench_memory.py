"""``bench/memory.py --mode imports``: what each group of the server's libraries adds to a fresh
interpreter. Nothing here compares a figure with a bound; the shape of the answer is checked."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from types import ModuleType

import pytest

from bench_module import bench_module


@pytest.fixture(scope="module")
def memory() -> Iterator[ModuleType]:
    yield from bench_module("memory")


def test_each_group_names_modules_this_environment_has(memory: ModuleType) -> None:
    """A renamed or dropped module would make the probe fail: the list follows the server."""
    for _label, modules in memory.IMPORT_GROUPS:
        for module in modules:
            assert importlib.util.find_spec(module) is not None, module


def test_import_costs_are_measured_group_after_group(memory: ModuleType) -> None:
    groups = (("already there", ("sys",)), ("decimal", ("decimal",)),
              ("decimal again", ("decimal",)))
    costs = memory.import_costs(groups)
    assert [label for label, _ in costs] == ["", "already there", "decimal", "decimal again"]
    assert costs[0][1] > 1  # a bare interpreter's own VmRSS, in MiB
    # A module imported before costs nothing the second time (the same interpreter throughout).
    assert abs(costs[1][1]) < 1 and abs(costs[3][1]) < 1


def test_sites_name_the_lines_that_hold_the_heap(
    memory: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    import tracemalloc

    tracemalloc.start()
    try:
        held = [bytes(1 << 20) for _ in range(4)]  # 4 MiB made on one line of this file
        snapshot = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    memory.print_sites(snapshot, 1)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and lines[0].startswith("the 1 allocation sites holding the most")
    assert "4.0 MiB" in lines[1] and "test_bench_memory.py:" in lines[1]
    assert len(held) == 4


def test_a_site_is_named_from_its_package(memory: ModuleType) -> None:
    assert memory._short("/v/lib/python3.11/site-packages/json/decoder.py") == "json/decoder.py"
    assert memory._short("/w/src/bundle_mcp/tools/context.py") == "bundle_mcp/tools/context.py"
    assert memory._short("/usr/lib/python3.11/json/decoder.py") == "json/decoder.py"
