"""One character per stem: how ``context``'s index (:mod:`._context_index`) keeps words.

A document's stemmed words used to be kept as text, each stem between separators: about 7.5
bytes a word, 55 MB for the 7.3 million words of a 10,000-concept bundle. Here each distinct
stem the process has seen gets a number, and a document's words are kept as a string with one
character per word, the character of its number: 2 bytes a word in CPython while the numbers
stay below 65,536 (a string's width is that of its widest character), and a stem is found in a
body with ``str.find`` of one character, in C.

The numbers only ever grow, and a stem keeps its number for the life of the process: a
document's words are reused across snapshots while its bytes stay the same, so the table is the
process's, like the interpreter's table of interned strings or the stem cache beside it. It
holds each distinct stem once (the same strings the stem cache returns).

Single characters run out past 1,112,064 numbers (every code point but the surrogates). A
document holding a stem numbered past that is kept *wide*: two characters for each of its
words, each below the surrogates, and a find counts only at even offsets (:func:`finds`). A
bundle meets that only when written to (random tokens by the million); it stays exact then,
only larger.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import cast

_SURROGATES = 0xD800  # first surrogate code point; 0xD800-0xDFFF are never a code
_SURROGATE_SPAN = 0x800
# Numbers with a one-character code: every code point but the surrogates.
SINGLE_LIMIT = 0x110000 - _SURROGATE_SPAN
_PAIR_BASE = _SURROGATES  # a wide code: two characters below the surrogates, base 0xD800


def single(number: int) -> str:
    """The one-character code of a number below :data:`SINGLE_LIMIT`."""
    return chr(number if number < _SURROGATES else number + _SURROGATE_SPAN)


def single_number(char: str) -> int:
    point = ord(char)
    return point if point < _SURROGATES else point - _SURROGATE_SPAN


def pair(number: int) -> str:
    """The two-character code of any number (a wide document's)."""
    high, low = divmod(number, _PAIR_BASE)
    return chr(high) + chr(low)


def pair_number(text: str, at: int) -> int:
    return ord(text[at]) * _PAIR_BASE + ord(text[at + 1])


class StemCodes:
    """Stem → number, assigned on first sight and never changed; and number → stem. A stem's
    one-character code is made from its number when asked (:meth:`narrow_codes`, in C): kept,
    the codes were a second table and a string object each (5.4 MiB for the bench bundle's
    49,760 stems)."""

    def __init__(self, single_limit: int = SINGLE_LIMIT) -> None:
        self.single_limit = single_limit  # lower only in tests, to reach wide documents
        self._numbers: dict[str, int] = {}
        self._stems: list[str] = []
        self._lock = threading.Lock()

    def numbers(self, stems: Iterable[str]) -> dict[str, int]:
        """The number of each of ``stems``, assigning the next ones to stems not seen yet."""
        known = self._numbers
        listed = list(stems)
        found = dict(zip(listed, map(known.get, listed, itertools.repeat(-1)), strict=True))
        if -1 in found.values():
            with self._lock:
                # In bulk: a restarted process numbers a kept table of every stem at once
                # (250,000 at 50,000 concepts).
                new = [s for s, number in found.items() if number < 0 and s not in known]
                first = len(self._stems)
                known.update(zip(new, range(first, first + len(new)), strict=True))
                self._stems.extend(new)
                found = dict(zip(found, map(known.__getitem__, found), strict=True))
        return found

    def narrow_codes(self, stems: list[str]) -> str | None:
        """The one-character codes of ``stems``, in order, as one string (assigning numbers to
        new stems), or ``None`` when one of them has none (its document is wide)."""
        found = list(map(self._numbers.get, stems))
        if None in found:
            self.numbers([s for s, n in zip(stems, found, strict=True) if n is None])
            found = list(map(self._numbers.get, stems))
        numbers = cast(list[int], found)  # every stem has a number now
        highest = max(numbers, default=-1)
        if highest >= self.single_limit:
            return None
        if highest < _SURROGATES:
            return "".join(map(chr, numbers))  # below the surrogates a code is its number
        return "".join(map(single, numbers))

    def number(self, stem: str) -> int | None:
        """The stem's number, ``None`` for a stem no document has had (a question's word: a
        question never adds to the table)."""
        return self._numbers.get(stem)

    def stem(self, number: int) -> str:
        return self._stems[number]

    def stems(self, numbers: Iterable[int]) -> Iterator[str]:
        """The stems of ``numbers``, looked up in C."""
        return map(self._stems.__getitem__, numbers)

    def __len__(self) -> int:
        return len(self._stems)


class Coding:
    """A document's code for each of its stems: single characters, or pairs when one of its
    numbers has no single character (:attr:`width` 2)."""

    __slots__ = ("width", "_codes")

    def __init__(self, codes: StemCodes, stems: Iterable[str]) -> None:
        distinct = list(dict.fromkeys(stems))
        narrow = codes.narrow_codes(distinct)
        if narrow is not None:
            self.width = 1
            self._codes = dict(zip(distinct, narrow, strict=True))
        else:
            self.width = 2
            self._codes = {s: pair(n) for s, n in codes.numbers(distinct).items()}

    def encode(self, stems: Iterable[str]) -> str:
        return "".join(map(self._codes.__getitem__, stems))


def code_of(codes: StemCodes, stem: str, width: int) -> str | None:
    """The stem's code in a document of ``width``, ``None`` when no document has the stem."""
    number = codes.number(stem)
    if number is None or (width == 1 and number >= codes.single_limit):
        return None  # a narrow document cannot hold it
    return single(number) if width == 1 else pair(number)


def decoded(codes: StemCodes, text: str, width: int) -> list[str]:
    """The stems a coded text holds, in order."""
    stem = codes.stem
    if width == 1:
        return [stem(single_number(c)) for c in text]
    return [stem(pair_number(text, at)) for at in range(0, len(text), 2)]


def distinct(codes: StemCodes, texts: Iterable[str], width: int) -> set[str]:
    """The distinct stems of coded texts."""
    stem = codes.stem
    if width == 1:
        chars = set().union(*texts)
        if not chars or max(chars) < chr(_SURROGATES):
            return set(codes.stems(map(ord, chars)))  # below the surrogates, a code's number
        return {stem(single_number(c)) for c in chars}
    return {stem(pair_number(text, at)) for text in texts for at in range(0, len(text), 2)}


def finds(text: str, code: str, width: int, start: int = 0, end: int | None = None
          ) -> Iterator[int]:
    """Offsets of ``code`` (one stem, or a run of stems) in a coded text, in order. In a wide
    text a find counts only at a word's start (an even offset): a code's second character and
    the next one's first may spell another code."""
    stop = len(text) if end is None else end
    find = text.find
    at = find(code, start, stop)
    if width == 1:
        step = len(code)
        while at >= 0:
            yield at
            at = find(code, at + step, stop)
        return
    while at >= 0:
        if at % 2 == 0:
            yield at
            at = find(code, at + len(code), stop)
        else:
            at = find(code, at + 1, stop)


def count(text: str, code: str, width: int) -> int:
    """How many times the stem (or run of stems) ``code`` is in a coded text."""
    if width == 1:
        return text.count(code)
    return sum(1 for _ in finds(text, code, width))


def holds(text: str, code: str, width: int) -> bool:
    if width == 1:
        return code in text
    return next(finds(text, code, width), None) is not None


class Recoder:
    """Rewrites texts from one numbering of stems to another (``mapping``: old number → new
    number), for one document: its kept form in the parse cache numbers its own stems from
    :data:`LOCAL_FIRST`, the process's table numbers them in the order it met them."""

    __slots__ = ("_from", "_to", "_mapping")

    def __init__(self, mapping: dict[int, int], from_width: int, to_width: int) -> None:
        self._from, self._to, self._mapping = from_width, to_width, mapping

    def __call__(self, text: str) -> str:
        """The text in the new numbering; ``KeyError`` for a code the mapping does not have
        (a damaged kept row: the caller builds the value anew)."""
        mapping = self._mapping
        if self._from == 2 and len(text) % 2:
            raise KeyError("half a code")
        old = (map(single_number, text) if self._from == 1
               else (pair_number(text, at) for at in range(0, len(text), 2)))
        code = single if self._to == 1 else pair
        return "".join(code(mapping[n]) for n in old)


class _NarrowDecoder:
    """A narrow kept form into narrow process codes, in C: the kept codes are consecutive
    characters from :data:`LOCAL_FIRST`, so ``str.translate`` indexes a string of the process's
    codes by them (about 25 ns a word, where a mapping built per document cost ten times
    that). A code below the first is translated to a surrogate, which no process code is; one
    past the last is left as it is, and ``max`` finds it."""

    __slots__ = ("_table", "_high")

    def __init__(self, codes: str) -> None:
        self._table = _NO_CODE * LOCAL_FIRST + codes
        self._high = chr(LOCAL_FIRST + len(codes) - 1)

    def __call__(self, text: str) -> str:
        found = text.translate(self._table)
        if _NO_CODE in found or (text and max(text) > self._high):
            raise KeyError("a code with no stem")
        return found


_NO_CODE = "\udfff"  # a surrogate: never a code


def decoder(codes: StemCodes, stems: list[str], kept_width: int
            ) -> tuple[Callable[[str], str], int]:
    """How to read a document's kept texts (its stems numbered from :data:`LOCAL_FIRST` in
    ``stems``' order, ``kept_width`` characters each) into this process's codes, and the
    width those take."""
    narrow = codes.narrow_codes(stems)
    if narrow is not None and kept_width == 1 and LOCAL_FIRST + len(stems) <= _SURROGATES:
        return (_NarrowDecoder(narrow) if stems else _empty), 1
    numbers = codes.numbers(stems)
    width = 1 if narrow is not None else 2
    return Recoder({LOCAL_FIRST + k: numbers[s] for k, s in enumerate(stems)}, kept_width,
                   width), width


def encoder(codes: StemCodes, texts: Iterable[str], width: int
            ) -> tuple[list[str], int, Callable[[str], str]]:
    """A document's kept form: its distinct stems (those of ``texts``, all of its coded texts),
    the width of the kept codes, and how to rewrite each text into them (the stem's place in
    the list, from :data:`LOCAL_FIRST`)."""
    texts = list(texts)
    if width == 1:
        chars = sorted(set().union(*texts))
        if (not chars or chars[-1] < chr(_SURROGATES)) and (
                LOCAL_FIRST + len(chars) <= _SURROGATES):
            # The common case, in C: a code below the surrogates is its number.
            stems = list(codes.stems(map(ord, chars)))
            table = dict(zip(map(ord, chars), map(chr, range(LOCAL_FIRST,
                                                             LOCAL_FIRST + len(chars))),
                             strict=True))

            def recode(text: str) -> str:
                return text.translate(table)

            return stems, 1, recode
    numbers = sorted(set().union(*(numbers_in(text, width) for text in texts)))
    kept = local_width(len(numbers))
    return ([codes.stem(n) for n in numbers], kept,
            Recoder({n: LOCAL_FIRST + k for k, n in enumerate(numbers)}, width, kept))


def _empty(text: str) -> str:
    """The decoder of a document with no words: any code is one too many."""
    if text:
        raise KeyError("a code with no stem")
    return text


# A document's kept form numbers its stems from here: JSON spells the control characters below
# it with six bytes each.
LOCAL_FIRST = 0x20


def local_width(stems: int) -> int:
    """The width of a kept form numbering ``stems`` stems from :data:`LOCAL_FIRST`."""
    return 1 if LOCAL_FIRST + stems <= SINGLE_LIMIT else 2


def numbers_in(text: str, width: int) -> set[int]:
    if width == 1:
        return {single_number(c) for c in set(text)}
    return {pair_number(text, at) for at in range(0, len(text), 2)}
