"""Load a script of ``bench/`` as a module for a test, and forget it afterwards.

The bench scripts are not a package (they run as ``python bench/<name>.py``), so tests load them
by path. The module is registered in ``sys.modules`` while loaded because dataclasses look
their module up there.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parent.parent / "bench"


def bench_module(name: str) -> Iterator[ModuleType]:
    """``bench/<name>.py`` as the module ``bench_<name>``, for the life of a fixture
    (``yield from bench_module("targets")``)."""
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        del sys.modules[spec.name]
