"""Decoding and line splitting shared by every parser, so all line numbers agree."""

from __future__ import annotations

import re

BOM = "\ufeff"
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def split_lines(text: str) -> list[str]:
    """Physical lines without terminators; CRLF, CR and LF each end one line.

    ``str.splitlines`` is not used: it also breaks on form feeds, U+2028 and other characters that
    Markdown does not treat as line ends, which would shift every later line number.
    """
    lines = _LINE_BREAK.split(text)
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def count_lines(text: str) -> int:
    """The number of physical lines, as ``len(split_lines(text))`` without building them."""
    if not text:
        return 0
    breaks = text.count("\n") if "\r" not in text else count_breaks(text)
    ends_with_break = text.endswith(("\n", "\r"))
    return breaks if ends_with_break else breaks + 1


def line_ends(text: str) -> list[int]:
    """Offsets just past each line terminator, for mapping an offset to a 1-based line."""
    return [m.end() for m in _LINE_BREAK.finditer(text)]


def count_breaks(text: str) -> int:
    """How many CR, LF or CRLF line terminators ``text`` holds."""
    if "\r" not in text:
        return text.count("\n")
    return sum(1 for _ in _LINE_BREAK.finditer(text))
