"""A document's :class:`MarkdownFacts`: the compiled path first, the reference where it declines.

The one place that chooses a parser, so neither parser imports the other's caller:
``markdown_fast`` imports its rules from ``markdown``, ``markdown`` imports neither, and this
module imports both. Both give the same facts (tests/test_markdown_agreement.py).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from ..model import Document, MarkdownFacts
from .markdown import parse_markdown_reference


def parse_markdown(doc: Document) -> MarkdownFacts:
    """Parse ``doc.body``; every line number is a 1-based physical line of the whole file.

    The compiled path (``markdown_fast``, markdown-it-pyrs) answers when it is installed and can
    rebuild this document's facts; otherwise, and for every document it hands back, the
    reference (``markdown.parse_markdown_reference``) does.
    """
    fast = _fast_path()
    if fast is not None:
        facts = fast(doc)
        if facts is not None:
            return facts
    return parse_markdown_reference(doc)


@functools.lru_cache(maxsize=1)
def _fast_path() -> Callable[[Document], MarkdownFacts | None] | None:
    # Imported on first use: markdown-it-pyrs is optional at run time (a platform without a
    # wheel still parses, with the reference).
    try:
        from .markdown_fast import parse_markdown_fast
    except ImportError:
        return None
    return parse_markdown_fast
