"""``bench/stdio_floor.py``: a ping, a call refused by its contract and a read over stdio, each
a median. Nothing here compares a figure with a bound; the shape of the answer is checked."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from bench_module import bench_module

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "coffee-roastery"


@pytest.fixture(scope="module")
def stdio_floor() -> Iterator[ModuleType]:
    yield from bench_module("stdio_floor")


@pytest.mark.slow
def test_each_request_is_timed_on_a_warm_server(stdio_floor: ModuleType) -> None:
    found = stdio_floor.floors(str(EXAMPLE), None, 5)
    names = list(found)
    assert names[:2] == ["ping", "read_concept refused by its contract"]
    assert names[2].startswith("read_concept ") and len(names) == 3
    assert all(ms > 0 for ms in found.values())


@pytest.mark.slow
def test_a_concept_that_cannot_be_read_stops_the_run(stdio_floor: ModuleType) -> None:
    with pytest.raises(SystemExit, match="no/such"):
        stdio_floor.floors(str(EXAMPLE), "no/such", 5)


def test_a_median_leaves_the_first_calls_out(stdio_floor: ModuleType) -> None:
    timings = iter([9.0, 0.001, 0.002, 0.003])
    assert stdio_floor.median_ms(lambda: next(timings), 3) == pytest.approx(2.0)
