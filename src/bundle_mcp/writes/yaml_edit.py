"""Surgical frontmatter edits: change what the data says, keep every other byte as written.

A write tool decides *what* the frontmatter should say (new JSON-native data); this module decides
*how* to say it with the smallest change to the text. The old block is composed with PyYAML to get
node marks, and only the spans of the values that differ are rewritten:

- a scalar that changed is replaced in place, in its original quoting style where possible;
- a key that disappeared loses its own lines (key line through the last line of its value); the
  comment and blank lines around it stay, since they may belong to the next key;
- a key that is new is appended at the end of its mapping, a list item that is new at the end of
  its list, with the indentation the neighbours already use;
- anything else (flow collections, type changes, reordering) re-emits the whole value of the
  top-level key that holds it, and nothing outside that key.

Every result is parsed back with the strict loader and must equal the requested data exactly,
key order included; if the surgical result does not, the coarse form is tried, and if that does
not either the edit is refused (:class:`EditError`, ``unsupported_presentation``). The Markdown
body is never part of an edit.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from ..errors import BundleMcpError
from ..loader.frontmatter import FrontmatterError, split_frontmatter
from ..loader.strict_yaml import StrictLoader, load_yaml
from ..loader.text import BOM

__all__ = ["EditError", "data_of", "emit_block", "rewrite", "same_data"]

UNSUPPORTED = "unsupported_presentation"
_OPENING = re.compile(r"\ufeff?---[ \t]*(?:\r\n|\r|\n)")
# Plain scalars we dare to write without quotes in block and flow context alike. A '#' inside a
# word is text (only a '#' after white space starts a comment): relation targets carry fragments.
_PLAIN_SAFE = re.compile(
    r"[A-Za-z0-9_./+@~][A-Za-z0-9_./+@~:#-]*(?: [A-Za-z0-9_./+@~:-][A-Za-z0-9_./+@~:#-]*)*")
_LINE_BREAKS = "\r\n"


class EditError(BundleMcpError):
    """The edit cannot be made without changing bytes it does not own."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message, code)


class _Fallback(Exception):
    """Internal: the surgical path does not apply here; re-emit the enclosing top-level value."""


class _SpanLoader(yaml.SafeLoader):
    """Pure-Python composer (its marks are character offsets) with the strict loader's resolvers."""


_SpanLoader.yaml_implicit_resolvers = StrictLoader.yaml_implicit_resolvers


class _Dumper(yaml.SafeDumper):
    """Block style, indented lists, double quotes whenever quoting is needed."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)

    def choose_scalar_style(self) -> str:
        style = super().choose_scalar_style()
        return '"' if style == "'" else style


def _dump(value: Any) -> str:
    """YAML text of ``value`` with ``\\n`` line ends; date-like strings come out quoted."""
    return yaml.dump(
        value,
        Dumper=_Dumper,
        sort_keys=False,
        allow_unicode=True,
        default_flow_style=False,
        width=1 << 30,
    )


# --------------------------------------------------------------------------------------------
# Whole documents


def data_of(text: str) -> dict[str, Any]:
    """The frontmatter of a whole file as JSON-native data (``{}`` without a block).

    Raises:
        EditError: when the block no longer parses (it did when the snapshot was taken).
    """
    try:
        split = split_frontmatter(text)
        return {} if split.raw is None else load_yaml(split.raw, split.raw_line)
    except FrontmatterError as exc:
        raise EditError("invalid_frontmatter", exc.message) from None


def same_data(a: Any, b: Any) -> bool:
    """Equality that also compares mapping key order (what a reader of the file sees)."""
    return _ordered(a) == _ordered(b)


def rewrite(text: str, new_data: Mapping[str, Any]) -> str:
    """The whole file with a frontmatter block that parses to ``new_data``; the body untouched.

    Raises:
        EditError: when no edit within the frontmatter produces exactly ``new_data``.
    """
    split = split_frontmatter(text)
    newline = _newline(text)
    if split.raw is None:
        if not new_data:
            return text
        start = 1 if text.startswith(BOM) else 0
        block = _convert(emit_block(dict(new_data)), newline)
        out = text[:start] + "---" + newline + block + "---" + newline + text[start:]
        _verify(out, new_data, text[start:])
        return out
    old_data = load_yaml(split.raw, split.raw_line)
    if same_data(old_data, new_data):
        return text
    opening = _OPENING.match(text)
    assert opening is not None  # split_frontmatter found the same opening line
    start, end = opening.end(), opening.end() + len(split.raw)
    assert text[start:end] == split.raw
    tail = text[end:]
    last_error: EditError | None = None
    for coarse in (False, True):
        try:
            raw = _Editor(split.raw, newline, coarse).edit(old_data, dict(new_data))
        except EditError as exc:
            last_error = exc
            continue
        out = text[:start] + raw + tail
        if _parses_to(out, new_data):
            return out
    raise last_error or EditError(
        UNSUPPORTED,
        "the frontmatter cannot be edited in place without changing other keys "
        "(anchors, aliases, merge keys or unusual layout)",
    )


def emit_block(data: Mapping[str, Any]) -> str:
    """A fresh frontmatter block body (``key: value`` lines) for ``data``."""
    return "" if not data else _dump(dict(data))


def _verify(out: str, new_data: Mapping[str, Any], body_tail: str) -> None:
    if not out.endswith(body_tail) or not _parses_to(out, new_data):
        raise EditError(UNSUPPORTED, "the new frontmatter block does not read back as intended")


def _parses_to(text: str, expected: Mapping[str, Any]) -> bool:
    try:
        return same_data(data_of(text), dict(expected))
    except EditError:
        return False


def _ordered(value: Any) -> tuple[str, Any]:
    if isinstance(value, Mapping):
        return ("{", tuple((k, _ordered(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return ("[", tuple(_ordered(v) for v in value))
    # bool is an int in Python: keep true and 1 apart.
    return (type(value).__name__, value)


def _newline(text: str) -> str:
    if "\r\n" in text:
        return "\r\n"
    if "\r" in text:
        return "\r"
    return "\n"


def _convert(emitted: str, newline: str) -> str:
    return emitted if newline == "\n" else emitted.replace("\n", newline)


# --------------------------------------------------------------------------------------------
# The editor over one raw block


@dataclass(frozen=True, slots=True)
class _Splice:
    start: int
    end: int
    text: str


class _Editor:
    """Plans splices over one raw frontmatter block, then applies them back to front."""

    def __init__(self, raw: str, newline: str, coarse: bool) -> None:
        self.raw = raw
        self.newline = newline
        self.coarse = coarse
        loader = _SpanLoader(raw)
        try:
            self.root = loader.get_single_node()
        finally:
            loader.dispose()
        self.shared = _shared_nodes(self.root)

    def edit(self, old: dict[str, Any], new: dict[str, Any]) -> str:
        root = self.root
        if root is None:
            return self.raw + _convert(emit_block(new), self.newline)
        if not isinstance(root, yaml.MappingNode) or root.flow_style:
            raise EditError(UNSUPPORTED, "the frontmatter is not a block mapping")
        entries = _entries(root)
        if set(entries) != set(old):
            raise _as_error("the block uses merge keys or keys the loader reads differently")
        kept = [k for k in old if k in new]
        if kept != [k for k in new if k in old]:
            raise EditError(UNSUPPORTED, "the edit would reorder existing keys")
        if list(new)[: len(kept)] != kept:
            raise EditError(UNSUPPORTED, "new keys can only be added after the existing ones")
        splices: list[_Splice] = []
        for key, (key_node, value_node) in entries.items():
            if key not in new:
                splices.append(self._delete_entry(key_node, value_node))
            elif not same_data(old[key], new[key]):
                splices.extend(self._top_level(key_node, value_node, old[key], new[key]))
        added = {k: v for k, v in new.items() if k not in old}
        if added:
            indent = " " * root.value[0][0].start_mark.column if root.value else ""
            text = _convert(_indent(_dump(added), indent), self.newline)
            splices.append(_Splice(len(self.raw), len(self.raw), self._tail_break() + text))
        return self._apply(splices)

    # -- top-level keys

    def _top_level(
        self, key_node: yaml.Node, value_node: yaml.Node, old: Any, new: Any
    ) -> list[_Splice]:
        if not self.coarse:
            try:
                found: list[_Splice] = []
                self._reconcile(value_node, old, new, found)
                return found
            except _Fallback:
                pass
        return [self._replace_value(key_node, value_node, new)]

    def _replace_value(self, key_node: yaml.Node, value_node: yaml.Node, new: Any) -> _Splice:
        self._refuse_shared(value_node)
        colon = self._colon_after(key_node)
        end = self._owned_end(value_node)
        emitted = _dump({"k": new})[2:]  # " value\n" or "\n  - item\n"
        indent = " " * key_node.start_mark.column
        first, _, rest = emitted.partition("\n")
        text = first + "\n" + _indent(rest, indent)
        return _Splice(colon + 1, end, _convert(text, self.newline))

    def _delete_entry(self, key_node: yaml.Node, value_node: yaml.Node) -> _Splice:
        self._refuse_shared(value_node)
        start = self._line_start(key_node.start_mark.index)
        if self.raw[start : key_node.start_mark.index].strip():
            raise _as_error("a key to remove does not start its own line")
        return _Splice(start, self._owned_end(value_node), "")

    # -- nested, surgical

    def _reconcile(self, node: yaml.Node, old: Any, new: Any, out: list[_Splice]) -> None:
        if same_data(old, new):
            return
        if id(node) in self.shared:
            raise _Fallback
        if isinstance(node, yaml.ScalarNode) and _is_scalar(old) and _is_scalar(new):
            out.append(self._replace_scalar(node, new))
        elif isinstance(node, yaml.MappingNode) and _both(old, new, dict):
            self._reconcile_mapping(node, old, new, out)
        elif isinstance(node, yaml.SequenceNode) and _both(old, new, list):
            self._reconcile_sequence(node, old, new, out)
        else:
            raise _Fallback

    def _replace_scalar(self, node: yaml.ScalarNode, new: Any) -> _Splice:
        start, end = node.start_mark.index, node.end_mark.index
        if node.style in ("|", ">") or self.raw[start : start + 1] in ("!", "&", "*"):
            raise _Fallback
        token = scalar_token(new, node.style, self.raw[start:end])
        # An empty value (``key:``) has no token yet; the new one needs its separating space.
        return _Splice(start, end, token if end > start else " " + token)

    def _reconcile_mapping(
        self,
        node: yaml.MappingNode,
        old: dict[str, Any],
        new: dict[str, Any],
        out: list[_Splice],
    ) -> None:
        if not node.value:
            raise _Fallback
        entries = _entries(node)
        if set(entries) != set(old):
            raise _Fallback  # merge keys or odd keys: the composed tree is not the data
        if node.flow_style:
            # {a: 1, b: 2}: values can change in place; adding or dropping keys cannot.
            if list(old) != list(new):
                raise _Fallback
            for key, (_, value_node) in entries.items():
                self._reconcile(value_node, old[key], new[key], out)
            return
        kept = [k for k in old if k in new]
        if kept != [k for k in new if k in old] or list(new)[: len(kept)] != kept:
            raise _Fallback
        for key, (key_node, value_node) in entries.items():
            if key not in new:
                start = self._line_start(key_node.start_mark.index)
                if self.raw[start : key_node.start_mark.index].strip():
                    raise _Fallback  # the key shares its line with a "- " marker
                out.append(_Splice(start, self._owned_end(value_node), ""))
            else:
                self._reconcile(value_node, old[key], new[key], out)
        added = {k: v for k, v in new.items() if k not in old}
        if added:
            at = self._owned_end(node)
            if at == 0 or self.raw[at - 1] not in _LINE_BREAKS:
                raise _Fallback
            indent = " " * node.value[0][0].start_mark.column
            out.append(_Splice(at, at, _convert(_indent(_dump(added), indent), self.newline)))

    def _reconcile_sequence(
        self, node: yaml.SequenceNode, old: list[Any], new: list[Any], out: list[_Splice]
    ) -> None:
        if not node.value or len(node.value) != len(old):
            raise _Fallback
        if node.flow_style:
            if len(new) != len(old):
                raise _Fallback
            for item, before, after in zip(node.value, old, new, strict=True):
                self._reconcile(item, before, after, out)
            return
        if len(new) > len(old) and same_data(new[: len(old)], old):
            at = self._owned_end(node)
            if at == 0 or self.raw[at - 1] not in _LINE_BREAKS:
                raise _Fallback
            dash = self._dash_column(node.value[0])
            text = _indent(_dump(new[len(old) :]), " " * dash)
            out.append(_Splice(at, at, _convert(text, self.newline)))
        elif len(new) < len(old):
            removed = _removed_positions(old, new)
            if removed is None:
                raise _Fallback
            for index in removed:
                item = node.value[index]
                self._dash_column(item)
                start = self._line_start(item.start_mark.index)
                out.append(_Splice(start, self._owned_end(item), ""))
        elif len(new) == len(old):
            for item, before, after in zip(node.value, old, new, strict=True):
                self._reconcile(item, before, after, out)
        else:
            raise _Fallback

    # -- text geometry

    def _dash_column(self, item: yaml.Node) -> int:
        """Column of the ``-`` that opens ``item``, which must sit on the item's first line."""
        start = self._line_start(item.start_mark.index)
        match = re.fullmatch(r"( *)-[ \t]+", self.raw[start : item.start_mark.index])
        if match is None:
            raise _Fallback
        return len(match.group(1))

    def _colon_after(self, key_node: yaml.Node) -> int:
        match = re.compile(r"[ \t]*:").match(self.raw, key_node.end_mark.index)
        if match is None:
            raise _as_error("cannot find the ':' after a key")
        return match.end() - 1

    def _line_start(self, index: int) -> int:
        return max(self.raw.rfind("\n", 0, index), self.raw.rfind("\r", 0, index)) + 1

    def _line_end(self, index: int) -> int:
        """Just past the line break of the line holding ``index`` (or the end of the block)."""
        n = len(self.raw)
        i = index
        while i < n and self.raw[i] not in _LINE_BREAKS:
            i += 1
        if i < n and self.raw[i] == "\r" and i + 1 < n and self.raw[i + 1] == "\n":
            return i + 2
        return min(i + 1, n)

    def _owned_end(self, node: yaml.Node) -> int:
        """End of the last line that holds content of ``node`` (a same-line comment included)."""
        end = _content_end(node)
        while end > node.start_mark.index and self.raw[end - 1] in " \t\r\n":
            end -= 1
        return self._line_end(max(end - 1, node.start_mark.index))

    def _tail_break(self) -> str:
        return "" if not self.raw or self.raw[-1] in _LINE_BREAKS else self.newline

    def _refuse_shared(self, node: yaml.Node) -> None:
        if _subtree_ids(node) & self.shared:
            raise _as_error("the value takes part in a YAML anchor or alias")

    def _apply(self, splices: list[_Splice]) -> str:
        ordered = sorted(splices, key=lambda s: (s.start, s.end))
        for before, after in zip(ordered, ordered[1:], strict=False):
            if before.end > after.start:
                raise _as_error("two edits overlap")
        out = self.raw
        for splice in reversed(ordered):
            out = out[: splice.start] + splice.text + out[splice.end :]
        return out


# --------------------------------------------------------------------------------------------
# Scalars


def scalar_token(value: Any, style: str | None = None, old_token: str = "") -> str:
    """The YAML text of one scalar, keeping ``style`` (``None`` plain, ``'`` or ``"``) if it can.

    A plain scalar stays plain only when the strict loader reads it back as the same string and,
    for date-like text, when the old token was plain date-like text too: a value that was written
    as a bare date may become a bare instant, but a new bare date is never introduced.
    """
    if not isinstance(value, str):
        return _dump(value).split("\n", 1)[0].removesuffix(" ...")
    if style == "'" and not any(c in value for c in "\r\n\t") and value.isprintable():
        return "'" + value.replace("'", "''") + "'"
    if style == '"':
        return json.dumps(value, ensure_ascii=False)
    if not style and _PLAIN_SAFE.fullmatch(value) and _strict_reads_as(value):
        if _std_reads_as_text(value) or not _std_reads_as_text(old_token):
            return value
    return json.dumps(value, ensure_ascii=False)


def _strict_reads_as(value: str) -> bool:
    try:
        return load_yaml(f"v: {value}\n", 0).get("v") == value
    except FrontmatterError:
        return False


def _std_reads_as_text(token: str) -> bool:
    """Whether a YAML 1.1 reader (PyYAML ``safe_load``) reads the plain token as a string."""
    if not token:
        return True
    try:
        return isinstance(yaml.safe_load(token), str)
    except yaml.YAMLError:
        return False


def _both(old: Any, new: Any, kind: type) -> bool:
    return isinstance(old, kind) and isinstance(new, kind)


def _is_scalar(value: Any) -> bool:
    return not isinstance(value, (dict, list))


# --------------------------------------------------------------------------------------------
# Node helpers


def _entries(node: yaml.MappingNode) -> dict[str, tuple[yaml.Node, yaml.Node]]:
    out: dict[str, tuple[yaml.Node, yaml.Node]] = {}
    for key_node, value_node in node.value:
        if not isinstance(key_node, yaml.ScalarNode):
            raise _as_error("a mapping key is not a plain scalar")
        out[_key_text(key_node)] = (key_node, value_node)
    return out


def _key_text(key_node: yaml.ScalarNode) -> str:
    # The strict loader reads keys through to_json; compose gives the raw scalar. They agree for
    # string keys, which is all the write tools address.
    return str(key_node.value)


def _content_end(node: yaml.Node) -> int:
    if isinstance(node, yaml.MappingNode) and not node.flow_style and node.value:
        return _content_end(node.value[-1][1])
    if isinstance(node, yaml.SequenceNode) and not node.flow_style and node.value:
        return _content_end(node.value[-1])
    return node.end_mark.index


def _shared_nodes(root: yaml.Node | None) -> set[int]:
    """Nodes reached more than once (anchored and aliased): editing one edits the others."""
    seen: set[int] = set()
    shared: set[int] = set()
    stack = [root] if root is not None else []
    while stack:
        node = stack.pop()
        if id(node) in seen:
            shared.add(id(node))
            continue
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                stack.extend((k, v))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
    return shared


def _subtree_ids(node: yaml.Node) -> set[int]:
    out: set[int] = set()
    stack = [node]
    while stack:
        current = stack.pop()
        if id(current) in out:
            continue
        out.add(id(current))
        if isinstance(current, yaml.MappingNode):
            for k, v in current.value:
                stack.extend((k, v))
        elif isinstance(current, yaml.SequenceNode):
            stack.extend(current.value)
    return out


def _removed_positions(old: list[Any], new: list[Any]) -> list[int] | None:
    """Positions of ``old`` that were dropped to give ``new`` (order kept), or ``None``."""
    removed: list[int] = []
    j = 0
    for i, item in enumerate(old):
        if j < len(new) and same_data(item, new[j]):
            j += 1
        else:
            removed.append(i)
    return removed if j == len(new) else None


def _indent(text: str, indent: str) -> str:
    if not indent:
        return text
    return "".join(indent + line if line.strip() else line for line in text.splitlines(True))


def _as_error(message: str) -> EditError:
    return EditError(UNSUPPORTED, message)
