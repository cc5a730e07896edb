"""Which files may link or relate to a concept, told from their text without parsing it.

Knowing the edges into one concept means looking at every file that could hold one. With no
index yet (a cold start, or no parse cache), that used to be every document of the bundle,
parsed: on a 9,746-page documentation folder a first ``get_neighbors`` waited about 8 s for
it. Most files cannot name the concept at all, and their text says so.

A link names a concept by a destination whose path, once decoded and its ``.`` and ``..``
segments applied, is the concept's file (``.md`` or not): so the ID's last segment (its
*name*) is in the decoded destination, whole, unless the path ends in a dot segment and names
a folder above the file (``[up](..)`` from ``a/b/c.md`` names ``a``), which only a file inside
the concept's folder can do. Decoding makes a character of the name out of other text only
through an escape in the body: a percent escape of one of its bytes (``resolve_link``
unquotes), a numeric character reference (``&#45;``), a named one whose text holds it
(``&hyphen;``, ``&fjlig;``), or a backslash before it when it is ASCII punctuation.

A relation names a concept by its canonical ID (``okf.relations.parse_reference``), written
in YAML. Loading makes a character out of other text only through a double-quoted scalar's
backslash escape, a single-quoted scalar's ``''``, a line folded into a space, or the
reference's own ``\\#``: so a name with none of ``'``, ``#``, ``\\`` or white space is in the
block's text whole, or, when the block holds a backslash, in a key or string of the
frontmatter as loaded (:class:`~bundle_mcp.loader.document.Checked` keeps it, every escape
decoded). Another name is looked for by its longest run of ASCII letters and digits
(:func:`needle`), which none of those forms can split.

So a body with none of those and a block with none of those (:func:`may_name`) hold no edge
into the concept. Anything else is looked at (parsed) as before: the filter only ever leaves
out files that cannot name the concept, so the edges found are the same.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from html.entities import html5
from typing import Any

# What decoding a Markdown link destination reads as something else: a percent escape (two
# hex digits), a numeric character reference, a named one, a backslash before ASCII
# punctuation (the only characters a backslash escapes).
_ESCAPE = re.compile(r"%[0-9A-Fa-f]{2}|&#|&[A-Za-z][A-Za-z0-9]*;|\\[!-/:-@\[-`{-~]")
_ALNUM_RUN = re.compile(r"[A-Za-z0-9]+")
# Characters that YAML spells some other way, or folds away, or that a reference escapes.
_NOT_LITERAL_IN_YAML = re.compile(r"['#\\\s]")


def needle(concept_id: str) -> str | None:
    """The longest run of ASCII letters and digits in the ID's last segment (the first of
    equal length), or None when it has none (a name in another script: no filter then)."""
    runs = _ALNUM_RUN.findall(concept_id.rsplit("/", 1)[-1])
    return max(runs, key=len) if runs else None


@dataclass(frozen=True, slots=True)
class _Target:
    """What a file's text is searched for, for one concept."""

    concept_id: str
    name: str  # the ID's last segment
    folder: str  # the ID and a slash: a file below it may name it with a dot segment
    chars: frozenset[str]  # the name's characters, any of which an escape may spell
    non_ascii: bool  # whether the name has a character past ASCII
    # What the frontmatter's text must hold: the name, or its needle when YAML may spell the
    # name otherwise; None when nothing can be told (no needle: every block is looked at).
    in_yaml: str | None


@functools.lru_cache(maxsize=16)  # one set of IDs asked of every file a call looks at
def _targets(concept_ids: tuple[str, ...]) -> tuple[_Target, ...]:
    out = []
    for concept_id in concept_ids:
        name = concept_id.rsplit("/", 1)[-1]
        in_yaml = needle(concept_id) if _NOT_LITERAL_IN_YAML.search(name) else name
        out.append(_Target(concept_id, name, concept_id + "/", frozenset(name),
                           not name.isascii(), in_yaml))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class _Spelled:
    """What a body's escapes may spell: some characters, any character past ASCII (a
    percent escape of a byte past 127: part of one), or anything (a numeric reference)."""

    chars: frozenset[str]
    non_ascii: bool
    anything: bool

    def any_of(self, target: _Target) -> bool:
        return self.anything or (self.non_ascii and target.non_ascii) or not (
            self.chars.isdisjoint(target.chars))


_NOTHING = _Spelled(frozenset(), False, False)


def _spelled(text: str, body_start: int) -> _Spelled:
    """The characters the escapes in ``text`` from ``body_start`` may stand for."""
    # Most bodies hold none of the characters an escape starts with: three searches in C
    # tell, where the pattern's would step through every character.
    escapes = set(_ESCAPE.findall(text, body_start)) if (
        text.find("%", body_start) >= 0 or text.find("&", body_start) >= 0
        or text.find("\\", body_start) >= 0) else set()
    # The Markdown parsers read a NUL as U+FFFD, past ASCII.
    non_ascii = text.find("\0", body_start) >= 0
    if not escapes:
        return _Spelled(frozenset(), True, False) if non_ascii else _NOTHING
    chars: set[str] = set()
    anything = False
    for escape in escapes:
        if escape[0] == "%":
            code = int(escape[1:], 16)
            if code < 0x80:
                chars.add(chr(code))
            else:
                non_ascii = True
        elif escape[0] == "\\":
            chars.add(escape[1])
        elif escape == "&#":
            anything = True
        else:
            # A name the table does not hold is not decoded: its characters are as written.
            chars.update(html5.get(escape[1:], ""))
    return _Spelled(frozenset(chars), non_ascii, anything)


def named(text: str, body_start: int, frontmatter: Mapping[str, Any] | None,
          concept_ids: tuple[str, ...], path: str) -> tuple[str, ...]:
    """The concepts of ``concept_ids`` that the file at ``path`` (as :func:`may_name` reads
    one) may link or relate to."""
    spelled = _spelled(text, body_start)
    find = text.find
    # The whole name in the body first, for every concept in one pass of C calls: most files
    # that name one of a walk's level name it so.
    return tuple(target.concept_id for target in _targets(concept_ids)
                 if find(target.name, body_start) >= 0
                 or _may_name(text, body_start, frontmatter, target, path, spelled))


def may_name(text: str, body_start: int, frontmatter: Mapping[str, Any] | None,
             concept_id: str, path: str) -> bool:
    """Whether the file at ``path``, whose whole text is ``text`` (its body from
    ``body_start``) and whose frontmatter loaded as ``frontmatter`` (None: it declares no
    relation), may link or relate to ``concept_id``; False only when it cannot (module
    docstring)."""
    return bool(named(text, body_start, frontmatter, (concept_id,), path))


def _may_name(text: str, body_start: int, frontmatter: Mapping[str, Any] | None,
              target: _Target, path: str, spelled: _Spelled) -> bool:
    # (The whole name in the body is looked for by the caller, named.)
    if path.startswith(target.folder) or spelled.any_of(target):
        return True
    if frontmatter is None:
        return False
    wanted = target.in_yaml
    if wanted is None or text.find(wanted, 0, body_start) >= 0:
        return True  # in the block's text: a relation's, or not, the parse will tell
    # Only a double-quoted scalar's backslash escape can spell a character the block's text
    # does not hold; without one, the loaded values hold nothing the text does not.
    return text.find("\\", 0, body_start) >= 0 and _holds(frontmatter, wanted)


def _holds(value: Any, wanted: str) -> bool:
    """Whether a key or a string anywhere in a loaded YAML value contains ``wanted``."""
    if isinstance(value, str):
        return wanted in value
    if isinstance(value, Mapping):
        return any(_holds(key, wanted) or _holds(item, wanted) for key, item in value.items())
    if isinstance(value, (list, tuple)):
        return any(_holds(item, wanted) for item in value)
    return False
