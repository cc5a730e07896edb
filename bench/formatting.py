"""Number formatting shared by the benchmark tables."""

from __future__ import annotations

from typing import Any


def fmt_time(seconds: Any) -> str:
    if seconds is None:
        return "-"
    if seconds >= 1:
        return f"{seconds:.2f} s"
    if seconds >= 0.001:
        return f"{seconds * 1000:.1f} ms"
    return f"{seconds * 1e6:.0f} µs"
