"""A frontmatter block's data: the compiled path first, the strict loader where it declines.

The one place that chooses a YAML loader, so neither loader imports the other's caller:
``yaml_fast`` imports its rules from ``strict_yaml``, ``strict_yaml`` imports neither, and this
module imports both. Both give the same data (tests/test_yaml_agreement.py); every error, its
code, message and line, is the strict loader's.
"""

from __future__ import annotations

import functools
import sys
import threading
from collections.abc import Callable
from typing import Any

from .strict_yaml import load_yaml

__all__ = ["load_frontmatter", "prepare"]

# yaml-rs's compiled library. It brings its own allocator (mimalloc), which takes the thread
# that loads the library for the process's main one: loaded in a thread that then ended, the
# next block read in another thread crashed the process with a segmentation fault (found by
# the suite: a dispatcher's worker threads come and go; tests/test_yaml_threads.py). So only
# the main thread loads it; until it has, blocks read in other threads go to the strict loader.
_LIBRARY = "yaml_rs._yaml_rs"


def load_frontmatter(raw: str, raw_line: int) -> dict[str, Any]:
    """Load a frontmatter block into JSON-native data, or raise
    :class:`~bundle_mcp.loader.frontmatter.FrontmatterError` (``strict_yaml.load_yaml``)."""
    fast = _fast_path()
    if fast is not None:
        data = fast(raw)
        if data is not None:
            return data
    return load_yaml(raw, raw_line)


def prepare() -> None:
    """Load the compiled path now if this is the main thread (a dispatcher does, as it is made:
    its calls and its warm-up run in threads that may end); elsewhere nothing happens."""
    _fast_path()


def _fast_path() -> Callable[[str], dict[str, Any] | None] | None:
    if _LIBRARY not in sys.modules and threading.current_thread() is not threading.main_thread():
        return None
    return _imported_fast_path()


@functools.lru_cache(maxsize=1)
def _imported_fast_path() -> Callable[[str], dict[str, Any] | None] | None:
    # Imported on first use: yaml-rs is optional at run time (a platform without a wheel
    # still loads every block, with the strict loader).
    try:
        from .yaml_fast import load_yaml_fast
    except ImportError:
        return None
    return load_yaml_fast
