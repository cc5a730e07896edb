"""Decoding and line splitting shared by every parser, so all line numbers agree."""

from __future__ import annotations

import re
from array import array
from collections.abc import Iterator, Sequence
from typing import overload

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


def count_breaks(text: str) -> int:
    """How many CR, LF or CRLF line terminators ``text`` holds."""
    if "\r" not in text:
        return text.count("\n")
    return sum(1 for _ in _LINE_BREAK.finditer(text))


class LineView(Sequence[str]):
    """The physical lines of a text, cut out on demand from two arrays of offsets.

    Keeping every document's lines as separate strings would hold the whole bundle twice; the
    offsets cost 8 bytes a line, and a slice of lines is built only when asked for.
    """

    __slots__ = ("_text", "_starts", "_ends")

    def __init__(self, text: str) -> None:
        starts = array("I", [0])
        ends = array("I")
        for match in _LINE_BREAK.finditer(text):
            ends.append(match.start())
            starts.append(match.end())
        if starts[-1] == len(text):
            starts.pop()  # a final terminator does not start another line
        else:
            ends.append(len(text))
        self._text = text
        self._starts = starts
        self._ends = ends

    def __len__(self) -> int:
        return len(self._starts)

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> list[str]: ...

    def __getitem__(self, index: int | slice) -> str | list[str]:
        if isinstance(index, slice):
            return [self._text[s:e] for s, e in
                    zip(self._starts[index], self._ends[index], strict=True)]
        return self._text[self._starts[index]:self._ends[index]]

    def __iter__(self) -> Iterator[str]:
        text = self._text
        for s, e in zip(self._starts, self._ends, strict=True):
            yield text[s:e]
