"""Rewrite or unlink Markdown link destinations in a document body, byte for byte elsewhere.

The Markdown parser (the loader's, :mod:`bundle_mcp.okf.markdown`) is the one judge of what is a
link; it reports each destination as written but not where. So an edit finds every place the
destination text could sit in link syntax (after ``](`` or a reference definition's ``]:``,
bare or in ``<…>``), replaces each candidate with a distinct sentinel and parses once: the
candidates whose sentinel comes back as a link destination are links, the others (a code span,
raw HTML, an image) are left alone. After the edit the body is parsed again and its links must
be exactly the old ones with the edited destinations changed (or gone, for an unlink), in
order; otherwise the edit is refused (:class:`LinkEditError`), never guessed at. A destination
the parser unescaped (``a\\_b.md``) is not found as written and is refused the same way.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import quote

from ..errors import BundleMcpError
from ..loader.document import parse_document
from ..model import Document

__all__ = ["LinkEditError", "encode_path", "edit_links", "retargeted"]

# Characters a bare destination cannot hold as they are, or that resolve_link would read as
# something else ('#' fragment, '?' query, '%' an escape): written percent-encoded.
_ENCODE = re.compile(r"[\s()<>\[\]%#?\\\x00-\x1f\x7f]")
_CLOSE = {'"': '"', "'": "'", "(": ")"}


class LinkEditError(BundleMcpError):
    """A link that cannot be edited in place; ``line`` is its 1-based line in the file."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.line = line


def encode_path(path: str) -> str:
    """``path`` as a link destination: the characters of :data:`_ENCODE` percent-encoded."""
    return _ENCODE.sub(lambda m: quote(m.group(0), safe=""), path)


def retargeted(raw: str, source_dir: str, target: str, *, directory: bool = False) -> str:
    """The destination ``raw`` (as written in a file of ``source_dir``) rewritten to name the
    bundle path ``target``, in the same style: root-absolute stays absolute, relative stays
    relative (recomputed from ``source_dir``, with a leading ``./`` kept), and the query and
    ``#fragment`` are kept as written."""
    dest = raw.strip()
    cut = min((i for i in (dest.find("#"), dest.find("?")) if i >= 0), default=len(dest))
    path_part, suffix = dest[:cut], dest[cut:]
    if path_part.startswith("/"):
        new = "/" + encode_path(target)
    else:
        new = encode_path(posixpath.relpath(target or ".", source_dir or "."))
        if path_part.startswith("./") and not new.startswith(".."):
            new = new if new.startswith("./") else "./" + new
    if directory and not new.endswith("/"):
        new += "/"
    return new + suffix


@dataclass(frozen=True, slots=True)
class _Candidate:
    start: int  # where the destination starts in the body
    end: int
    raw: str
    definition: bool  # a reference definition ('[label]: dest'), not an inline link
    bracket: int  # the body offset of ']' before '(' or ':'
    angle: bool


def _candidates(body: str, raws: set[str]) -> list[_Candidate]:
    found: list[_Candidate] = []
    for raw in sorted(raws):
        pattern = re.compile(
            r"\](\(|:)[ \t]*(?:(?:\r\n?|\n)[ \t]*)?(<)?" + re.escape(raw)
            + r"(?(2)(?=>)|(?=[\s)]|\Z))"
        )
        for m in pattern.finditer(body):
            start = m.end() - len(raw)
            found.append(_Candidate(start, m.end(), raw, m.group(1) == ":", m.start(),
                                    bool(m.group(2))))
    found.sort(key=lambda c: c.start)
    kept: list[_Candidate] = []
    for c in found:
        if not kept or c.start >= kept[-1].end:
            kept.append(c)
    return kept


def _sentinel_body(body: str, cands: list[_Candidate], names: list[str]) -> str:
    parts: list[str] = []
    at = 0
    for c, name in zip(cands, names, strict=True):
        parts.append(body[at:c.start])
        parts.append(name)
        at = c.end
    parts.append(body[at:])
    return "".join(parts)


def _links(doc: Document, body: str) -> list[str]:
    text = doc.text[: doc.body_start] + body
    return [link.raw for link in parse_document(doc.path, text.encode("utf-8")).markdown.links]


def _line_of(doc: Document, offset: int) -> int:
    return doc.text.count("\n", 0, doc.body_start + offset) + 1


def edit_links(doc: Document, changes: Mapping[str, str | None]) -> str:
    """``doc``'s body with every link whose destination is a key of ``changes`` rewritten to
    its value, or (value ``None``) replaced by its link text.

    Raises:
        LinkEditError: a link that is not written where the parser reads it (escapes, entities),
            a reference-style link to unlink, or an edit that would change other links.
    """
    body = doc.body
    wanted = {raw for raw in changes if any(link.raw == raw for link in doc.markdown.links)}
    if not wanted:
        return body
    cands = _candidates(body, wanted)
    names = _sentinels(body, len(cands))
    seen = set(_links(doc, _sentinel_body(body, cands, names)))
    real = [c for c, name in zip(cands, names, strict=True) if name in seen]
    out: list[str] = []
    at = 0
    for c in real:
        new = changes[c.raw]
        if new is not None:
            out.append(body[at:c.start])
            out.append(new)
            at = c.end
            continue
        if c.definition:
            raise LinkEditError(
                f"a reference-style link definition names {c.raw!r}; remove it by hand",
                _line_of(doc, c.start))
        opening = _opening_bracket(body, c.bracket)
        closing = _closing_paren(body, c.end + (1 if c.angle else 0))
        if opening is None or closing is None or opening < at:
            raise LinkEditError(f"the link to {c.raw!r} cannot be taken apart in place",
                                _line_of(doc, c.start))
        out.append(body[at:opening])
        out.append(body[opening + 1:c.bracket])
        at = closing + 1
    out.append(body[at:])
    new_body = "".join(out)
    expected = [changes.get(raw, raw) if raw in changes else raw
                for raw in (link.raw for link in doc.markdown.links)]
    if _links(doc, new_body) != [raw for raw in expected if raw is not None]:
        line = next((link.line for link in doc.markdown.links if link.raw in wanted), None)
        raise LinkEditError(
            "a link to the concept is written in a form that cannot be edited in place "
            "(backslash escapes or character references in its destination); edit it by hand",
            line)
    return new_body


def _sentinels(body: str, count: int) -> list[str]:
    stem = "zqbundleedit"
    while stem in body:
        stem += "q"
    return [f"{stem}{n}x" for n in range(count)]


def _opening_bracket(body: str, close: int) -> int | None:
    """The ``[`` that opens the link text closed by the ``]`` at ``close``."""
    depth = 0
    i = close - 1
    while i >= 0:
        ch = body[i]
        escaped = i > 0 and body[i - 1] == "\\"
        if not escaped and ch == "]":
            depth += 1
        elif not escaped and ch == "[":
            if depth == 0:
                return i
            depth -= 1
        i -= 1
    return None


def _closing_paren(body: str, i: int) -> int | None:
    """The ``)`` that ends an inline link whose destination ends at ``i`` (a title between)."""
    n = len(body)
    while i < n and body[i] in " \t\r\n":
        i += 1
    if i < n and body[i] in _CLOSE:
        close = _CLOSE[body[i]]
        i += 1
        while i < n and body[i] != close:
            i += 2 if body[i] == "\\" else 1
        i += 1
        while i < n and body[i] in " \t\r\n":
            i += 1
    return i if i < n and body[i] == ")" else None
