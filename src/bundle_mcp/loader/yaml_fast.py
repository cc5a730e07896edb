"""The compiled path to a frontmatter block's data: yaml-rs, read the strict loader's way.

yaml-rs (a YAML 1.2 parser in Rust) builds the whole block's dicts, lists and strings in one
call, about seven times faster than libyaml's node tree walked from Python. The strict loader
(:func:`bundle_mcp.loader.strict_yaml.load_yaml`, libyaml) stays the reference: its rules decide
which plain words are typed, its messages name what is wrong. So this path answers only where
the two cannot differ, and hands every other block back (``None``) for the reference to load:

- a block whose text holds anything the two parsers read differently (found by a differential
  run over the corpora and by hypothesis, ``tests/test_yaml_agreement.py``): characters libyaml
  breaks lines at or refuses (U+0085, U+2028, U+2029, a BOM, tabs, CR, other controls),
  anchors, aliases, tags and merge keys, block scalars (an empty one keeps its line break for
  yaml-rs), ``|`` or ``>`` where a token could start, and document markers or directives at a
  line's start;
- a value that is not a string, a list or a mapping with string keys (a YAML 1.2 number is not
  the strict loader's: ``017``, ``1_000``, ``1e3``), and a string that the strict loader would
  type if it were written plain (``implicit_tag``): whether it was quoted is not in the result;
- a block yaml-rs refuses (a duplicate key among them), anything but a mapping at the top,
  nesting near the strict loader's limit, and a block past its byte cap.
"""

from __future__ import annotations

import re
import sys
from typing import Any

import yaml_rs

from .frontmatter import MAX_FRONTMATTER_BYTES, MAX_NESTING
from .strict_yaml import TYPED_WORDS

__all__ = ["load_yaml_fast"]

# Characters outside printable ASCII, LF and the Unicode both parsers read alike. One class
# scanned alone: an alternation with the patterns below took ten times as long.
_UNREAD_ALIKE = re.compile(
    r"[^\n\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd\U00010000-\U0010ffff]"
)
_NODE_PROPERTIES = ("&", "*", "!", "<<")  # anchors, aliases, explicit tags, merge keys
# A block scalar, or | and > where a flow token could start.
_BLOCK_SCALAR = re.compile(r"(?:^|[ \[{,:?-])[|>]", re.MULTILINE)
# The explicit key indicator: "?" then a space, a line's end or a flow indicator.
_EXPLICIT_KEY = re.compile(r"\?(?:[ \n,\[\]{}]|$)")
# What matters inside a flow collection: its brackets, quotes, and the characters libyaml reads
# by other rules there (":" and "?" end a plain scalar or start a key, "#" a comment).
_FLOW_MARKS = re.compile(r"[\[\]{}:?#\"']")
_FLOW_OPEN = re.compile(r"[\[{]")
# The common flow collection, read in one match: a flat sequence of quoted scalars and plain
# words holding none of those characters (tags and keyword lists are written so).
# Possessive throughout: nothing is tried twice, so a hostile megabyte costs one pass.
_ITEM = r"""(?:"(?:[^"\\]|\\.)*+"|'(?:[^']|'')*+'|[^\[\]{}:?#"',\n]*+)"""
_FLAT_SEQUENCE = re.compile(
    rf"\[(?:[ \n]*+{_ITEM}[ \n]*+,)*+[ \n]*+{_ITEM}[ \n]*+\]", re.DOTALL)
# A quoted scalar from its opening quote to its closing one (escapes and doubled quotes kept).
_QUOTED = {
    '"': re.compile(r'"(?:[^"\\]|\\.)*+"', re.DOTALL),
    "'": re.compile(r"'(?:[^']|'')*+'"),
}
_DOCUMENT_MARKERS = ("---", "...", "%")  # at a line's start: markers and directives
_MARKER_LINES = tuple("\n" + marker for marker in _DOCUMENT_MARKERS)
# Any byte count past the cap is at least this many characters (UTF-8 spends up to 4 a
# character), so shorter text needs no encoding to know it is within the cap.
_SHORT_ENOUGH = MAX_FRONTMATTER_BYTES // 4
# A word's first character → the pattern of the words it types (a dict: a faster get).
_typed = dict(TYPED_WORDS).get
# Nesting this deep goes to the reference, whose error names the level it passes.
_DEEPEST = MAX_NESTING - 2


class _Fallback(Exception):
    """The block is the reference's to load."""


def load_yaml_fast(raw: str) -> dict[str, Any] | None:
    """The block's data exactly as :func:`~bundle_mcp.loader.strict_yaml.load_yaml` loads it
    (keys interned likewise), or ``None`` where only the reference can tell."""
    if _for_the_reference(raw):
        return None
    try:
        loaded = yaml_rs.loads(
            raw, parse_datetime=False,
            duplicate_key_policy=yaml_rs.DuplicateKeyPolicy.Error,
        )
    except (yaml_rs.YAMLDecodeError, TypeError):
        # TypeError: a mapping or sequence as a key, which a dict cannot hold.
        return None
    if type(loaded) is not dict:
        return None
    try:
        return _mapping(loaded, 0)
    except _Fallback:
        return None


def _for_the_reference(raw: str) -> bool:
    """Whether the text holds something the two parsers may read differently."""
    if len(raw) > _SHORT_ENOUGH and len(raw.encode("utf-8")) > MAX_FRONTMATTER_BYTES:
        return True
    if any(mark in raw for mark in _NODE_PROPERTIES):
        return True
    if ("|" in raw or ">" in raw) and _BLOCK_SCALAR.search(raw):
        return True
    if raw.startswith(_DOCUMENT_MARKERS) or any(line in raw for line in _MARKER_LINES):
        return True
    if "?" in raw and _EXPLICIT_KEY.search(raw):
        return True
    if ("[" in raw or "{" in raw) and _unsure_flow(raw):
        return True
    return _UNREAD_ALIKE.search(raw) is not None


def _unsure_flow(raw: str) -> bool:
    """Whether a flow collection (``[…]``, ``{…}``) holds a character the two parsers read by
    different rules there, or is not closed. Quoted scalars inside one are skipped whole: a
    quote opens one only where a flow token starts (after ``[``, ``{`` or ``,``); elsewhere it
    is a plain scalar's character. A bracket outside a flow collection (in a quoted scalar,
    say) only makes the count stricter."""
    at = 0
    while (opened := _FLOW_OPEN.search(raw, at)) is not None:
        flat = _FLAT_SEQUENCE.match(raw, opened.start())
        if flat is not None:
            at = flat.end()
            continue
        depth, at = 1, opened.end()
        while depth:
            mark = _FLOW_MARKS.search(raw, at)
            if mark is None:
                return True  # not closed: the reference says why
            char, start, at = mark.group(), mark.start(), mark.end()
            if char in "[{":
                depth += 1
            elif char in "]}":
                depth -= 1
            elif char in ":?#":
                return True
            else:
                before = start - 1
                while before >= 0 and raw[before] in " \n":
                    before -= 1
                if before >= 0 and raw[before] in "[{,":
                    quoted = _QUOTED[char].match(raw, start)
                    if quoted is None:
                        return True
                    at = quoted.end()
    return False


def _mapping(value: dict[Any, Any], depth: int) -> dict[str, Any]:
    if depth > _DEEPEST:
        raise _Fallback
    out: dict[str, Any] = {}
    inner = depth + 1
    for key, item in value.items():
        # Most keys and values are strings, checked here without a call of their own: a word
        # the strict loader would type written plain (TYPED_WORDS) may have been quoted.
        if type(key) is not str or ((typed := _typed(key[:1])) and typed.match(key)):
            raise _Fallback
        if type(item) is str:
            if (typed := _typed(item[:1])) and typed.match(item):
                raise _Fallback
        else:
            item = _nested(item, inner)
        # Interned as the reference interns them: every document spells the same few keys.
        out[sys.intern(key)] = item
    return out


def _nested(value: Any, depth: int) -> Any:
    kind = type(value)
    if kind is dict:
        return _mapping(value, depth)
    if kind is not list or depth > _DEEPEST:
        raise _Fallback
    inner = depth + 1
    out = []
    for item in value:
        if type(item) is str:
            if (typed := _typed(item[:1])) and typed.match(item):
                raise _Fallback
        else:
            item = _nested(item, inner)
        out.append(item)
    return out
