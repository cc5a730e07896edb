"""Split the frontmatter block off a document.

python-frontmatter is not used for the split: it strips the text (so body line numbers drift),
drops the metadata of a file that starts with a BOM, and reads a leading thematic break as a
delimiter (research/mcp-sdk-2.md §5.1). Here the first physical line must be exactly ``---`` and the
block ends at the next line that is exactly ``---``; the raw block text is kept byte for byte.

The block is loaded as strict YAML by :func:`bundle_mcp.loader.strict_yaml.load_yaml`, a module
of its own that the loader imports when it first loads a block: a restarted server reads its
frontmatter from the parse cache, and its first answer no longer waits for PyYAML's import
(about 23 ms).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .text import BOM, count_breaks

MAX_FRONTMATTER_BYTES = 1024 * 1024
MAX_EXPANDED_NODES = 100_000
MAX_ALIASES = 1_000
MAX_NESTING = 64

class FrontmatterError(Exception):
    """A frontmatter problem with its diagnostic code and 1-based file line."""

    def __init__(self, code: str, message: str, line: int | None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.line = line


@dataclass(frozen=True, slots=True)
class Split:
    """``raw`` is the text between the delimiter lines; ``body_line`` is 1-based."""

    raw: str | None
    # The whole text, not the body: a body copy would double each file's memory until its
    # document is built (every file of a bundle is checked before any is built).
    text: str = field(repr=False)
    body_line: int
    raw_line: int
    body_start: int
    raw_start: int = 0
    raw_end: int = 0

    @property
    def body(self) -> str:
        """The text after the frontmatter block (cut when asked for, not kept)."""
        return self.text[self.body_start:]


def split_frontmatter(text: str) -> Split:
    """Find the frontmatter block. A document without one is all body.

    The opening line must be exactly ``---`` (trailing spaces allowed, a leading BOM tolerated);
    an opening with no closing line is ``unterminated_frontmatter``.
    """
    start = 1 if text.startswith(BOM) else 0
    opening = DELIMITER_LINE.match(text, start)
    if opening is None:
        return Split(None, text, 1, 0, start)
    raw_start = opening.end()
    empty = DELIMITER_LINE.match(text, raw_start)
    if empty is not None:
        raw_end, body_start = raw_start, empty.end()
    else:
        closing = _CLOSING.search(text, raw_start)
        if closing is None:
            raise FrontmatterError(
                "unterminated_frontmatter",
                "frontmatter opened with '---' on line 1 is never closed",
                1,
            )
        raw_end, body_start = closing.start() + len(closing.group(1)), closing.end()
    raw = text[raw_start:raw_end]
    return Split(raw, text, count_breaks(raw) + 3, 2, body_start, raw_start, raw_end)


# A delimiter line is exactly ``---`` plus optional spaces or tabs, ended by a line break or the
# end of the text; the closing one is searched for at the start of a line.
DELIMITER_LINE = re.compile(r"---[ \t]*(?:\r\n|\r|\n|\Z)")
_CLOSING = re.compile(r"(\r\n|\r|\n)---[ \t]*(?:\r\n|\r|\n|\Z)")

