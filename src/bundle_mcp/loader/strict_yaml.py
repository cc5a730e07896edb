"""The strict YAML loader of a frontmatter block (:func:`load_yaml`).

libyaml's safe loader with three changes: no implicit timestamps (a date stays the text that was
written), YAML 1.2 booleans (only true/false), and duplicate keys rejected. Alias and merge
structures are measured before construction: a cycle or an expansion beyond
``MAX_EXPANDED_NODES`` is ``invalid_yaml_graph``.
"""

from __future__ import annotations

import base64
import math
import re
import sys
import types
from collections.abc import Hashable, Mapping
from typing import TYPE_CHECKING, Any

import yaml

from ..okf.properties import scalar_text
from .frontmatter import (
    MAX_ALIASES,
    MAX_EXPANDED_NODES,
    MAX_FRONTMATTER_BYTES,
    MAX_NESTING,
    FrontmatterError,
)
from .text import count_breaks

__all__ = ["STR_TAG", "TYPED_WORDS", "StrictLoader", "implicit_tag", "load_yaml", "to_json"]

if TYPE_CHECKING:
    # Checked as SafeLoader: CSafeLoader has the same constructor and resolver API
    # (SafeConstructor, Resolver), which is all StrictLoader uses.
    _BaseLoader = yaml.SafeLoader
else:
    _BaseLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


STR_TAG = "tag:yaml.org,2002:str"


class StrictLoader(_BaseLoader):
    """Safe loader: YAML 1.2 booleans, no timestamps, duplicate keys rejected."""

    def resolve(self, kind: type[yaml.Node], value: Any, implicit: tuple[bool, bool]) -> str:
        """PyYAML's ``resolve`` for a loader without path resolvers, with the resolver lists
        put together once (:data:`_IMPLICIT`): the C composer calls it for every node, and
        the general version took a fifth of the time of loading a frontmatter."""
        if kind is yaml.ScalarNode:
            return implicit_tag(value) if implicit[0] else STR_TAG
        return _SEQ_TAG if kind is yaml.SequenceNode else _MAP_TAG

    def descend_resolver(self, current_node: Any, current_index: Any) -> None:
        """No path resolvers are registered: nothing to track on the way down."""

    def ascend_resolver(self) -> None:
        """No path resolvers are registered: nothing to track on the way up."""

    def construct_mapping(
        self, node: yaml.MappingNode, deep: bool = False
    ) -> dict[Hashable, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                duplicate = key in seen
            except TypeError:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping",
                    node.start_mark,
                    "found an unhashable key",
                    key_node.start_mark,
                ) from None
            if duplicate:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping",
                    node.start_mark,
                    f"found duplicate key {key!r}",
                    key_node.start_mark,
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


StrictLoader.yaml_implicit_resolvers = {
    first: [
        (tag, rx)
        for tag, rx in resolvers
        if tag not in ("tag:yaml.org,2002:timestamp", "tag:yaml.org,2002:bool")
    ]
    for first, resolvers in _BaseLoader.yaml_implicit_resolvers.items()
}
# An explicit ``!!timestamp`` keeps the text too: every value must stay JSON-native.
# types-PyYAML types add_constructor's callable as taking a loader, not a bare SafeConstructor
# (the class construct_yaml_str is defined on); PyYAML registers such methods itself.
StrictLoader.add_constructor(  # type: ignore[type-var]
    "tag:yaml.org,2002:timestamp", StrictLoader.construct_yaml_str
)
StrictLoader.add_implicit_resolver(
    "tag:yaml.org,2002:bool",
    re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
    list("tTfF"),
)

# StrictLoader's implicit resolvers by a scalar's first character, each list followed by the
# resolvers for any character, as PyYAML's resolve assembles them on every call.
_Resolvers = tuple[tuple[str, re.Pattern[str]], ...]
_ANY_FIRST: _Resolvers = tuple(StrictLoader.yaml_implicit_resolvers.get(None, ()))
_IMPLICIT: Mapping[str | None, _Resolvers] = types.MappingProxyType({
    first: (*resolvers, *_ANY_FIRST)
    for first, resolvers in StrictLoader.yaml_implicit_resolvers.items()
    if first is not None
})
if StrictLoader.yaml_path_resolvers:  # StrictLoader.resolve assumes there are none
    raise ImportError("StrictLoader must not register path resolvers")


# Whether a plain word is typed at all (not which tag), by its first character: every resolver
# listed under that character in one pattern, each keeping its own flags, so one match call
# answers (a compiled path checks every string it is handed). Words starting with any other
# character are strings: every resolver is listed under its first characters.
if _ANY_FIRST:  # TYPED_WORDS assumes there are none
    raise ImportError("StrictLoader's implicit resolvers must each list their first characters")
TYPED_WORDS: Mapping[str, re.Pattern[str]] = types.MappingProxyType({
    first: re.compile("|".join(
        f"(?{'x' if regexp.flags & re.VERBOSE else '-x'}:{regexp.pattern})"
        for _, regexp in resolvers
    ))
    for first, resolvers in _IMPLICIT.items()
    if first is not None and resolvers
})


def implicit_tag(value: str) -> str:
    """The tag a plain (unquoted, untagged) scalar spelled ``value`` resolves to: the one home
    of which plain words are booleans, numbers, nulls, merges or values, and which stay
    strings (``STR_TAG``)."""
    for tag, regexp in _IMPLICIT.get(value[:1], _ANY_FIRST):
        if regexp.match(value):
            return tag
    return STR_TAG


def load_yaml(raw: str, raw_line: int) -> dict[str, Any]:
    """Load a frontmatter block into JSON-native data, or raise :class:`FrontmatterError`."""
    if len(raw.encode("utf-8")) > MAX_FRONTMATTER_BYTES:
        raise FrontmatterError(
            "resource_limit", "frontmatter is larger than 1 MiB", raw_line or None
        )
    loader = StrictLoader(raw)
    try:
        node = loader.get_single_node()
        if node is None:
            return {}
        if _needs_full_constructor(raw):
            _check_graph(node, raw_line, raw)
            value = loader.construct_document(node)
            if isinstance(value, dict):
                value = {_key_text(k): to_json(v) for k, v in value.items()}
        else:
            value = _plain_value(loader, node, raw_line, raw, 0)
    except yaml.YAMLError as exc:
        raise FrontmatterError(
            "invalid_frontmatter", _yaml_message(exc), _yaml_line(exc, raw_line, raw)
        ) from None
    except (ValueError, TypeError, KeyError, AttributeError, IndexError):
        # An explicit tag that does not fit its value (``!!int abc``, ``!!map [1]``) makes
        # PyYAML's constructors raise plain Python errors; the file is unparseable, not a crash.
        raise FrontmatterError(
            "invalid_frontmatter", "invalid YAML: a value does not match its tag", raw_line or None
        ) from None
    except RecursionError:
        raise FrontmatterError(
            "invalid_yaml_graph", "frontmatter nests too deeply", raw_line or None
        ) from None
    finally:
        loader.dispose()
    if not isinstance(value, dict):
        raise FrontmatterError(
            "invalid_frontmatter",
            f"frontmatter must be a YAML mapping, not {_kind(value)}",
            raw_line or None,
        )
    return value


_SCALAR = yaml.ScalarNode
_SEQ_TAG = "tag:yaml.org,2002:seq"
_MAP_TAG = "tag:yaml.org,2002:map"


def _needs_full_constructor(raw: str) -> bool:
    """Anchors, aliases, merge keys and explicit tags need PyYAML's constructor and the graph
    check; plain frontmatter (nearly all of it) can be read straight off the node tree."""
    return "&" in raw or "*" in raw or "<<" in raw or "!" in raw


def _plain_value(loader: Any, node: yaml.Node, raw_line: int, raw: str, depth: int) -> Any:
    """JSON-native data from a node tree without anchors, aliases, merges or explicit tags.

    About three times faster than constructing Python objects and converting them: strings are
    taken as they are and only the few non-string scalars go through the constructor.
    """
    if depth > MAX_NESTING:
        raise FrontmatterError(
            "invalid_yaml_graph", f"frontmatter nests deeper than {MAX_NESTING} levels",
            _mark(node, raw_line, raw),
        )
    if isinstance(node, yaml.ScalarNode):
        if node.tag == STR_TAG:
            return node.value
        return to_json(loader.construct_object(node))
    inner = depth + 1
    # A string scalar child is taken here without a call of its own (most nodes are one):
    # only where the call would not have refused its depth, so the errors stay the same.
    inline = inner <= MAX_NESTING
    if isinstance(node, yaml.SequenceNode) and node.tag == _SEQ_TAG:
        return [
            child.value if inline and type(child) is _SCALAR and child.tag == STR_TAG
            else _plain_value(loader, child, raw_line, raw, inner)
            for child in node.value
        ]
    if isinstance(node, yaml.MappingNode) and node.tag == _MAP_TAG:
        out: dict[str, Any] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                raise FrontmatterError(
                    "invalid_frontmatter", "invalid YAML: a mapping key must be a scalar",
                    _mark(key_node, raw_line, raw),
                )
            if inline and key_node.tag == STR_TAG:
                # Interned: every document spells the same few keys, and each keeps its own.
                key = sys.intern(key_node.value)
            else:
                key = _key_text(_plain_value(loader, key_node, raw_line, raw, inner))
            if key in out:
                raise FrontmatterError(
                    "invalid_frontmatter", f"invalid YAML: found duplicate key {key!r}",
                    _mark(key_node, raw_line, raw),
                )
            if inline and type(value_node) is _SCALAR and value_node.tag == STR_TAG:
                out[key] = value_node.value
            else:
                out[key] = _plain_value(loader, value_node, raw_line, raw, inner)
        return out
    return to_json(loader.construct_object(node, deep=True))


def _check_graph(root: yaml.Node, raw_line: int, raw: str) -> None:
    """Reject alias cycles and alias fan-out before anything is constructed.

    Expanded size is computed per node with memoisation, so a billion-laughs document is measured
    in time linear in its text while its expansion is counted exactly.
    """
    expanded: dict[int, int] = {}
    visiting: set[int] = set()
    seen_nodes: set[int] = set()
    aliases = 0

    def size(node: yaml.Node, depth: int) -> int:
        nonlocal aliases
        key = id(node)
        if key in seen_nodes:
            aliases += 1
            if aliases > MAX_ALIASES:
                raise FrontmatterError(
                    "invalid_yaml_graph", f"frontmatter uses more than {MAX_ALIASES} aliases",
                    raw_line or None,
                )
        if key in visiting:
            raise FrontmatterError(
                "invalid_yaml_graph", "frontmatter contains a recursive alias",
                _mark(node, raw_line, raw),
            )
        if key in expanded:
            return expanded[key]
        if depth > MAX_NESTING:
            raise FrontmatterError(
                "invalid_yaml_graph", f"frontmatter nests deeper than {MAX_NESTING} levels",
                _mark(node, raw_line, raw),
            )
        seen_nodes.add(key)
        visiting.add(key)
        total = 1
        if isinstance(node, yaml.SequenceNode):
            for child in node.value:
                total += size(child, depth + 1)
        elif isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                total += size(k, depth + 1) + size(v, depth + 1)
        visiting.discard(key)
        expanded[key] = total
        if total > MAX_EXPANDED_NODES:
            raise FrontmatterError(
                "invalid_yaml_graph",
                f"frontmatter aliases expand to more than {MAX_EXPANDED_NODES} nodes",
                _mark(node, raw_line, raw),
            )
        return total

    size(root, 0)


def to_json(value: Any) -> Any:
    """JSON-native data from a constructed YAML value (no dates, bytes, NaN or non-string keys)."""
    if isinstance(value, dict):
        return {_key_text(k): to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    if isinstance(value, set):
        return sorted(_key_text(v) for v in value)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, float) and not math.isfinite(value):
        return ".nan" if math.isnan(value) else (".inf" if value > 0 else "-.inf")
    return value


def _key_text(key: Any) -> str:
    return key if isinstance(key, str) else scalar_text(to_json(key))


def _kind(value: Any) -> str:
    if value is None:
        return "empty"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return "a string"
    return f"a {type(value).__name__}"


def _mark(node: yaml.Node, raw_line: int, raw: str) -> int | None:
    return _file_line(getattr(node, "start_mark", None), raw_line, raw)


def _yaml_line(exc: yaml.YAMLError, raw_line: int, raw: str) -> int | None:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    return _file_line(mark, raw_line, raw)


def _file_line(mark: Any, raw_line: int, raw: str) -> int | None:
    """A YAML mark as a physical file line.

    YAML also breaks lines at U+0085, U+2028 and U+2029, so ``mark.line`` can drift; the
    character offset is counted against CR, LF and CRLF only.
    """
    if mark is None or not raw_line:
        return raw_line or None
    index = getattr(mark, "index", None)
    if not isinstance(index, int):
        line: int = mark.line  # a yaml.Mark's 0-based line
        return raw_line + line
    return raw_line + count_breaks(raw[:index])


def _yaml_message(exc: yaml.YAMLError) -> str:
    problem = getattr(exc, "problem", None)
    context = getattr(exc, "context", None)
    parts = [p for p in (context, problem) if p]
    return "invalid YAML: " + ("; ".join(parts) if parts else "cannot be parsed")
