"""Read-only mappings whose keys are held once for every mapping with the same keys.

A bundle's frontmatter repeats a few shapes: at 9,978 concepts the bench bundle's 111,665
frozen mappings have 165 distinct key sets (``{target}`` 34,943 times, a source's
``{id, resource, title, last_modified}`` 19,906 times). A ``MappingProxyType`` over a dict
costs each of them its own hash table: 280 bytes for one key, 25.4 MiB in all. A
:class:`FrozenMap` holds its values in a tuple and points at its :class:`Shape`: the keys in
order and their positions, made once per process for each key set (96 bytes for one key).

Shapes are kept for the life of the process, like interned strings (the same keys recur in
every snapshot and every bundle served), and at most :data:`MAX_SHAPES` of them: a mapping
whose key set is not among them, or that has a key other than a string, stays a
``MappingProxyType`` over its dict, which reads the same.
"""

from __future__ import annotations

import sys
import threading
import types
from collections.abc import Callable, ItemsView, Iterator, KeysView, Mapping, ValuesView
from typing import Any

__all__ = ["MAX_SHAPES", "FrozenMap", "Shape", "frozen_mapping"]

# Enough for any bundle's frontmatter written by people or generators (the bench bundle has
# 165; a shape is about 0.5 KiB), and a bound on what a hostile bundle with a new key set in
# every file can make the process keep.
MAX_SHAPES = 4096
# Past this many keys a mapping stays a proxy over its dict: large key sets seldom repeat.
MAX_SHAPE_KEYS = 64


class Shape:
    """The keys of every :class:`FrozenMap` with these keys, in order, and their positions."""

    __slots__ = ("keys", "positions")

    def __init__(self, keys: tuple[str, ...]) -> None:
        self.keys = keys
        self.positions = {key: n for n, key in enumerate(keys)}


class _Shapes:
    """The process's shapes by key tuple; a shape once made is never replaced."""

    def __init__(self) -> None:
        self._by_keys: dict[tuple[str, ...], Shape] = {}
        self._lock = threading.Lock()

    def of(self, keys: tuple[Any, ...]) -> Shape | None:
        """The shape of ``keys``, made (its keys interned) if they are at most
        :data:`MAX_SHAPE_KEYS` strings and there is room; else None."""
        shape = self._by_keys.get(keys)
        if shape is not None:
            return shape
        if len(keys) > MAX_SHAPE_KEYS or not all(type(key) is str for key in keys):
            return None
        with self._lock:
            shape = self._by_keys.get(keys)
            if shape is None and len(self._by_keys) < MAX_SHAPES:
                shape = Shape(tuple([sys.intern(key) for key in keys]))
                self._by_keys[shape.keys] = shape
            return shape

    def __len__(self) -> int:
        return len(self._by_keys)


# Process-wide, as the interpreter's table of interned strings is: every snapshot of every
# served bundle shares it, and it only grows, to MAX_SHAPES.
SHAPES = _Shapes()


class FrozenMap(Mapping[str, Any]):
    """A read-only mapping: its values in a tuple, its keys its :class:`Shape`'s.

    Reads as a dict would (order, equality with any mapping, ``get``, ``in``); unhashable, as a
    dict and a ``MappingProxyType`` are.
    """

    __slots__ = ("_shape", "_values")

    def __init__(self, shape: Shape, values: tuple[Any, ...]) -> None:
        if len(values) != len(shape.keys):
            raise ValueError("a frozen mapping needs one value for each of its shape's keys")
        self._shape = shape
        self._values = values

    def __getitem__(self, key: str) -> Any:
        return self._values[self._shape.positions[key]]

    def get(self, key: str, default: Any = None) -> Any:
        position = self._shape.positions.get(key)
        return default if position is None else self._values[position]

    def __contains__(self, key: object) -> bool:
        return key in self._shape.positions

    def __iter__(self) -> Iterator[str]:
        return iter(self._shape.keys)

    def __len__(self) -> int:
        return len(self._values)

    def keys(self) -> KeysView[str]:
        return _Keys(self)

    def items(self) -> ItemsView[str, Any]:
        return _Items(self)

    def values(self) -> ValuesView[Any]:
        return _Values(self)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, FrozenMap):
            if other._shape is self._shape:
                return self._values == other._values
            return len(self) == len(other) and dict(self.items()) == dict(other.items())
        if isinstance(other, Mapping):
            return dict(self.items()) == dict(other.items())
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # unhashable, as the dict it stands for

    def __repr__(self) -> str:
        return f"FrozenMap({dict(self.items())!r})"


class _Keys(KeysView[str]):
    __slots__ = ()
    _mapping: FrozenMap

    def __iter__(self) -> Iterator[str]:
        return iter(self._mapping._shape.keys)


class _Items(ItemsView[str, Any]):
    __slots__ = ()
    _mapping: FrozenMap

    def __iter__(self) -> Iterator[tuple[str, Any]]:
        mapping = self._mapping
        return zip(mapping._shape.keys, mapping._values, strict=True)


class _Values(ValuesView[Any]):
    __slots__ = ()
    _mapping: FrozenMap

    def __iter__(self) -> Iterator[Any]:
        return iter(self._mapping._values)


def frozen_mapping(items: dict[Any, Any], freeze: Callable[[Any], Any]) -> Mapping[Any, Any]:
    """A read-only mapping of ``items`` with each value passed through ``freeze``: a
    :class:`FrozenMap` when its keys are strings and their shape is or can be kept, else a
    proxy over a dict (its string keys interned)."""
    shape = SHAPES.of(tuple(items))
    if shape is not None:
        return FrozenMap(shape, tuple([freeze(value) for value in items.values()]))
    return types.MappingProxyType({
        sys.intern(key) if type(key) is str else key: freeze(value)
        for key, value in items.items()})
