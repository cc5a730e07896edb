"""Unit vectors as ``array('f')``: no numpy needed outside the embedder itself."""

from __future__ import annotations

import math
import operator
from array import array
from collections.abc import Iterable
from typing import TypeAlias

# array('f'): float32, unit length. A type alias only: build vectors with array("f", ...).
Vector: TypeAlias = "array[float]"


def unit(values: Iterable[float]) -> Vector | None:
    """The float32 unit vector of ``values``; ``None`` for a zero or non-finite vector."""
    vector = array("f", values)
    norm = math.sqrt(sum(x * x for x in vector))
    if not math.isfinite(norm) or norm == 0.0:
        return None
    return array("f", (x / norm for x in vector))


def cosine(a: Vector, b: Vector) -> float:
    """Cosine similarity of two unit vectors (their dot product)."""
    # operator.mul is typed Any -> Any; on two float arrays each product is a float.
    total: float = sum(map(operator.mul, a, b))
    return total
