"""A document's words as stem codes (tools/_stem_codes): coded, kept and read back unchanged.

Written on the module's functions with made-up stems, so each path is reached without a
bundle: a narrow document, a wide one (a process table with room for few single characters),
and a document with more distinct stems than a kept form numbers below the surrogates.
"""

from __future__ import annotations

import tracemalloc

import pytest

from bundle_mcp.tools._stem_codes import (
    LOCAL_FIRST,
    Coding,
    StemCodes,
    decoded,
    decoder,
    distinct,
    encoder,
)


def _round_trip(codes: StemCodes, stems: list[str], fresh: StemCodes) -> None:
    """Code ``stems`` with ``codes``, keep them, read them back with ``fresh`` (a restarted
    process's table): the same words, in order."""
    coding = Coding(codes, stems)
    text = coding.encode(stems)
    assert decoded(codes, text, coding.width) == stems
    assert distinct(codes, (text,), coding.width) == set(stems)
    kept_stems, kept_width, recode = encoder(codes, (text,), coding.width)
    kept = recode(text)
    read, width = decoder(fresh, kept_stems, kept_width)
    assert decoded(fresh, read(kept), width) == stems


def test_a_narrow_document_round_trips() -> None:
    stems = [f"w{n % 300}" for n in range(5_000)]
    _round_trip(StemCodes(), stems, StemCodes())


def test_a_wide_document_round_trips_and_reads_back_narrow() -> None:
    stems = [f"w{n % 300}" for n in range(5_000)]
    small = StemCodes(single_limit=100)
    assert Coding(small, stems).width == 2
    _round_trip(small, stems, StemCodes())  # the next process has room: narrow again


def test_more_stems_than_a_kept_form_numbers_below_the_surrogates() -> None:
    count = 0xD800 - LOCAL_FIRST + 10
    stems = [f"w{n}" for n in range(count)] + ["w0", "w1"]
    _round_trip(StemCodes(), stems, StemCodes())


@pytest.mark.parametrize("kept", ["!", " !", "\x1f", "\ud800"])
def test_a_code_past_the_kept_stems_is_refused(kept: str) -> None:
    read, _ = decoder(StemCodes(), ["only"], 1)
    with pytest.raises(KeyError):
        read(kept)


def test_the_table_keeps_a_number_a_stem_and_no_code_string() -> None:
    """A stem's one-character code is made from its number when asked: kept, the codes were a
    second dict and a string object a stem (5.4 MiB for the bench bundle's 49,760 stems)."""
    stems = [f"stem{n}" for n in range(20_000)]
    codes = StemCodes()
    tracemalloc.start()
    try:
        codes.numbers(stems)
        kept, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert kept / len(stems) < 130  # the dict's entry, the list's slot, the number
    narrow = codes.narrow_codes(stems[::-1])
    assert narrow is not None and [ord(c) for c in narrow] == list(range(19_999, -1, -1))
