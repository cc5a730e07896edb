"""Frozen frontmatter mappings share their keys (bundle_mcp.frozen_map, model.freeze)."""

from __future__ import annotations

import sys
import types
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bundle_mcp import frozen_map
from bundle_mcp.frozen_map import FrozenMap, _Shapes
from bundle_mcp.model import freeze, thaw

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.sampled_from(["id", "type", "target", "by", "at", "é", ""]) | st.text(
        max_size=4), inner, max_size=5),
    max_leaves=20,
)


def _proxied(value: Any) -> Any:
    """What freezing made before FrozenMap: proxies over dicts, tuples for lists."""
    if isinstance(value, dict):
        return types.MappingProxyType({k: _proxied(v) for k, v in value.items()})
    if isinstance(value, list):
        return tuple(_proxied(v) for v in value)
    return value


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.text(max_size=6), JSON, max_size=8))
def test_a_frozen_mapping_reads_as_the_proxy_freezing_made(data: dict[str, Any]) -> None:
    frozen, proxy = freeze(data), _proxied(data)
    assert isinstance(frozen, Mapping) and not isinstance(frozen, dict)
    assert frozen == proxy and proxy == frozen and not frozen != proxy
    assert frozen == dict(proxy) and dict(proxy) == frozen
    assert thaw(frozen) == data
    assert list(frozen) == list(data) and len(frozen) == len(data)
    assert list(frozen.keys()) == list(data.keys())
    assert list(frozen.items()) == list(proxy.items())
    assert list(frozen.values()) == list(proxy.values())
    assert frozen.items() == proxy.items() and frozen.keys() == proxy.keys()
    for key in data:
        assert key in frozen and key in frozen.keys() and (key, proxy[key]) in frozen.items()
        assert frozen[key] == proxy[key] and frozen.get(key) == proxy[key]
    assert "\x00missing" not in frozen and frozen.get("\x00missing", 7) == 7
    with pytest.raises(KeyError):
        frozen["\x00missing"]
    assert freeze(data) == frozen
    if data:
        changed = dict(data)
        changed[next(iter(data))] = "\x00changed"
        assert freeze(changed) != frozen


def test_mappings_with_the_same_keys_share_one_shape_of_interned_keys() -> None:
    first = freeze({"id": "s1", "resource": "r", "title": "t", "last_modified": "2025-01-01"})
    second = freeze({"id": "s2", "resource": "q", "title": "u", "last_modified": "2025-01-02"})
    other_order = freeze({"resource": "q", "id": "s2", "title": "u", "last_modified": "x"})
    assert isinstance(first, FrozenMap) and isinstance(second, FrozenMap)
    assert first._shape is second._shape and other_order._shape is not first._shape
    assert list(other_order) == ["resource", "id", "title", "last_modified"]
    key = "".join(["last_", "modified"])  # not the literal: a new string object
    assert next(k for k in second if k == key) is sys.intern(key)
    assert first != second and first != other_order
    again = {"id": "s1", "resource": "r", "title": "t", "last_modified": "2025-01-01"}
    assert freeze(again) == first


def test_a_frozen_mapping_is_read_only_and_unhashable() -> None:
    frozen = freeze({"target": "a/b"})
    with pytest.raises(TypeError):
        frozen["target"] = "c"  # type: ignore[index]
    with pytest.raises(AttributeError):
        frozen.other = 1  # type: ignore[attr-defined]
    with pytest.raises(TypeError):
        hash(frozen)


def test_a_one_key_mapping_costs_a_third_of_a_dict_and_its_proxy() -> None:
    """The bench bundle's most common mapping, ``{target: …}``: 280 bytes as a proxy over its
    dict, under 100 as a FrozenMap (its shape is shared)."""
    data = {"target": "tables/deadline-customer-04121#backfills"}
    frozen = freeze(data)
    assert isinstance(frozen, FrozenMap)
    kept = sys.getsizeof(frozen) + sys.getsizeof(frozen._values)
    proxied = sys.getsizeof(types.MappingProxyType(data)) + sys.getsizeof(data)
    assert kept * 2 < proxied


def test_keys_that_are_not_strings_or_too_many_stay_a_proxy() -> None:
    numbered = freeze({1: "a", "b": 2})
    many = freeze({f"k{n}": n for n in range(frozen_map.MAX_SHAPE_KEYS + 1)})
    for frozen in (numbered, many):
        assert isinstance(frozen, types.MappingProxyType)
    assert numbered == {1: "a", "b": 2} and len(many) == frozen_map.MAX_SHAPE_KEYS + 1


def test_the_shape_table_stops_growing_at_its_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """A hostile bundle with new keys in every file cannot grow the table without end: past
    the bound a mapping is a proxy over its dict, equal all the same."""
    monkeypatch.setattr(frozen_map, "MAX_SHAPES", 3)
    shapes = _Shapes()
    monkeypatch.setattr(frozen_map, "SHAPES", shapes)
    made = [freeze({f"key{n}": n}) for n in range(5)]
    assert [type(m) is FrozenMap for m in made] == [True, True, True, False, False]
    assert len(shapes) == 3
    assert made == [{f"key{n}": n} for n in range(5)]
    assert isinstance(freeze({"key1": "again"}), FrozenMap)  # a kept shape is still used


def test_frozen_values_nest_as_before() -> None:
    frozen = freeze({"relations": {"see_also": [{"target": "a"}, {"target": "b"}]}, "tags": ["x"]})
    assert isinstance(frozen["relations"], FrozenMap)
    assert isinstance(frozen["relations"]["see_also"], tuple)
    assert frozen["relations"]["see_also"][1] == {"target": "b"}
    assert frozen["tags"] == ("x",)
    assert repr(frozen).startswith("FrozenMap({'relations'")
