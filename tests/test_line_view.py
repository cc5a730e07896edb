"""LineView, the lines every line number counts, against the plain split it stands for."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from bundle_mcp.loader.text import LineView, split_lines

# Line ends of every kind, and characters str.splitlines would break on but Markdown does not.
TEXT = st.lists(st.sampled_from(["a", "é", " ", "\n", "\r", "\r\n", "\f", "\u2028"])).map("".join)


@settings(max_examples=400, deadline=None)
@given(TEXT, st.integers(-3, 12), st.integers(-3, 12))
def test_lines_and_spans_match_the_split(text: str, first: int, last: int) -> None:
    lines = split_lines(text)
    view = LineView(text)
    assert list(view) == lines and len(view) == len(lines)
    assert [view[n] for n in range(len(lines))] == lines
    assert view[first:last] == lines[first:last]
    assert view.span(first, last) == "\n".join(lines[first:last])
