"""Decoding and line splitting shared by every parser, so all line numbers agree."""

from __future__ import annotations

import itertools
import operator
import re
from array import array
from collections.abc import Iterator
from typing import overload

from ..model import Lines

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


class LineView(Lines):
    """The physical lines of a text, cut out on demand from two arrays of offsets.

    Keeping every document's lines as separate strings would hold the whole bundle twice; the
    offsets cost 8 bytes a line, and a slice of lines is built only when asked for.
    """

    __slots__ = ("_text", "_starts", "_ends", "_lf_only")

    def __init__(self, text: str) -> None:
        self._text = text
        self._lf_only = "\r" not in text
        if self._lf_only:
            # Most files end their lines with LF alone: split once and add up the lengths,
            # which runs in C, instead of one regex match per line.
            lengths = [len(piece) for piece in text.split("\n")]
            steps = map(operator.add, lengths[:-1], itertools.repeat(1))
            starts = array("I", itertools.accumulate(steps, initial=0))
            ends = array("I", map(operator.add, starts, lengths))
        else:
            starts = array("I", [0])
            ends = array("I")
            for match in _LINE_BREAK.finditer(text):
                ends.append(match.start())
                starts.append(match.end())
            ends.append(len(text))
        if starts[-1] == len(text):
            # A final terminator does not start another line (and the empty text has none).
            starts.pop()
            ends.pop()
        self._starts = starts
        self._ends = ends

    def bounds(self, first: int, last: int) -> tuple[int, int]:
        return self._starts[first], self._ends[last - 1]

    def span(self, first: int, last: int) -> str:
        """Lines ``first..last-1`` joined with LF; one slice of the text when it has no CR."""
        first, last, _ = slice(first, last).indices(len(self._starts))
        if first >= last:
            return ""
        if self._lf_only:
            return self._text[self._starts[first]:self._ends[last - 1]]
        return "\n".join(self[first:last])

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
