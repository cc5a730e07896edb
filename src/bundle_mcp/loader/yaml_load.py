"""A frontmatter block's data: the compiled path first, the strict loader where it declines.

The one place that chooses a YAML loader, so neither loader imports the other's caller:
``yaml_fast`` imports its rules from ``strict_yaml``, ``strict_yaml`` imports neither, and this
module imports both. Both give the same data (tests/test_yaml_agreement.py); every error, its
code, message and line, is the strict loader's.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from .strict_yaml import load_yaml
from .yaml_library import may_load

__all__ = ["load_frontmatter"]


def load_frontmatter(raw: str, raw_line: int) -> dict[str, Any]:
    """Load a frontmatter block into JSON-native data, or raise
    :class:`~bundle_mcp.loader.frontmatter.FrontmatterError` (``strict_yaml.load_yaml``)."""
    fast = _fast_path()
    if fast is not None:
        data = fast(raw)
        if data is not None:
            return data
    return load_yaml(raw, raw_line)


def _fast_path() -> Callable[[str], dict[str, Any] | None] | None:
    # Only where yaml-rs may be loaded (yaml_library): elsewhere the strict loader reads.
    return _imported_fast_path() if may_load() else None


@functools.lru_cache(maxsize=1)
def _imported_fast_path() -> Callable[[str], dict[str, Any] | None] | None:
    # Imported on first use: yaml-rs is optional at run time (a platform without a wheel
    # still loads every block, with the strict loader).
    try:
        from .yaml_fast import load_yaml_fast
    except ImportError:
        return None
    return load_yaml_fast
