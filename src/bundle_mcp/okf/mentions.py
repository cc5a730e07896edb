"""Which files may link or relate to a concept, told from their text without parsing it.

Knowing the edges into one concept means looking at every file that could hold one. With no
index yet (a cold start, or no parse cache), that used to be every document of the bundle,
parsed: on a 9,746-page documentation folder a first ``get_neighbors`` waited about 8 s for
it. Most files cannot name the concept at all, and their text says so.

A link or a relation names a concept by its ID, so the name's last segment (the file name,
``.md`` or not) is in the destination or the reference once it is decoded. The needle is the
longest run of ASCII letters and digits of that segment (:func:`needle`). Decoding cannot make
such a run out of other characters, except:

- in a Markdown link destination, a percent escape of a letter or digit (``%61`` is ``a``;
  ``resolve_link`` unquotes), a numeric character reference (``&#97;``), or the one named
  reference whose text holds ASCII letters (``&fjlig;``, "fj"); a backslash escape only ever
  stands for punctuation, and a line break cannot fall inside a destination's run of letters;
- in the frontmatter, YAML's double-quoted escapes (``"\\x61"``) and escaped line breaks, all
  of them spelled with a backslash. When the block holds one, the frontmatter as loaded
  (:class:`~bundle_mcp.loader.document.Checked` keeps it, every escape decoded) is searched.

So a body that holds neither the needle nor one of those escapes (:func:`may_name`) has no
link to the concept, and a frontmatter block that holds neither the needle nor a backslash (or
whose loaded keys and strings do not hold it) has no relation to it. Anything else is looked
at (parsed) as before: the filter only ever leaves out files that cannot name the concept, so
the edges found are the same.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any

# The escapes that may spell an ASCII letter or digit in a link destination: a percent escape
# of one (%30-%39, %41-%5A, %61-%7A, either case of hex digit), any numeric character
# reference, and the one named reference that decodes to ASCII letters (HTML's "fj" ligature;
# checked against Python's html.entities.html5 in tests/test_mentions.py).
_ENCODED_ALNUM = re.compile(r"%(?:3[0-9]|4[1-9A-Fa-f]|5[0-9Aa]|6[1-9A-Fa-f]|7[0-9Aa])|&#|&fjlig;")
_ALNUM_RUN = re.compile(r"[A-Za-z0-9]+")


def needle(concept_id: str) -> str | None:
    """The longest run of ASCII letters and digits in the ID's last segment (the first of
    equal length), or None when it has none (a name in another script: no filter then)."""
    runs = _ALNUM_RUN.findall(concept_id.rsplit("/", 1)[-1])
    return max(runs, key=len) if runs else None


@functools.lru_cache(maxsize=16)  # one set of IDs asked of every file a call looks at
def needles(concept_ids: tuple[str, ...]) -> tuple[str | None, ...]:
    """:func:`needle` of each ID."""
    return tuple(map(needle, concept_ids))


def named(text: str, body_start: int, frontmatter: Mapping[str, Any] | None,
          concept_ids: tuple[str, ...]) -> tuple[str, ...]:
    """The concepts of ``concept_ids`` that a file (as :func:`may_name` reads one) may link or
    relate to: every one when its body holds an escape that may spell a letter or digit, or
    when an ID has no needle."""
    if _ENCODED_ALNUM.search(text, body_start):
        return concept_ids
    return tuple(concept_id for concept_id, found in zip(concept_ids, needles(concept_ids),
                                                          strict=True)
                 if found is None or may_name(text, body_start, frontmatter, found))


def may_name(text: str, body_start: int, frontmatter: Mapping[str, Any] | None,
             needle: str) -> bool:
    """Whether a file whose whole text is ``text`` (its body from ``body_start``) and whose
    frontmatter loaded as ``frontmatter`` may link or relate to a concept whose
    :func:`needle` is ``needle``; False only when it cannot (module docstring)."""
    if text.find(needle, body_start) >= 0 or _ENCODED_ALNUM.search(text, body_start):
        return True
    if frontmatter is None:
        return False
    if text.find(needle, 0, body_start) >= 0:
        return True  # in the block's text: a relation's, or not, the parse will tell
    # Only a double-quoted scalar's backslash escape can spell a letter the block's text does
    # not hold; without one, the loaded values hold no needle the text does not.
    return text.find("\\", 0, body_start) >= 0 and _holds(frontmatter, needle)


def _holds(value: Any, needle: str) -> bool:
    """Whether a key or a string anywhere in a loaded YAML value contains ``needle``."""
    if isinstance(value, str):
        return needle in value
    if isinstance(value, Mapping):
        return any(_holds(key, needle) or _holds(item, needle) for key, item in value.items())
    if isinstance(value, (list, tuple)):
        return any(_holds(item, needle) for item in value)
    return False
