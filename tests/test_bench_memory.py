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
