"""The compiled path to :class:`MarkdownFacts`: markdown-it-pyrs's tree, read the reference's way.

markdown-it-pyrs is the Rust port of markdown-it, the parser behind the reference path in
:mod:`bundle_mcp.okf.markdown`, so both recognise the same CommonMark + table + footnote syntax.
This module only rebuilds, from the Rust tree, the facts the reference reads off markdown-it-py's
token stream, with the reference's own quirks (line counting, footnote order and text, heading
text); resolving links and cutting sections stay in ``markdown.py``, the one home of those rules.

Where the two parsers differ and the reference's answer cannot be recovered from the tree, the
document is handed back (``None``) and the caller parses it with the reference instead:
``tests/test_markdown_agreement.py`` proves the result is always the reference's.
"""

from __future__ import annotations

import bisect
import re
import sys
from collections.abc import Iterable, Sequence
from urllib.parse import unquote

from markdown_it_pyrs import MarkdownIt as RustMarkdownIt
from markdown_it_pyrs import Node

from ..model import Document, FootnoteDef, FootnoteRef, Link, MarkdownFacts, anchors_of
from .markdown import build_sections, markdown_parser, outside_bundle, resolve_link

_PARSER = RustMarkdownIt("commonmark").enable_many(["table", "footnote"])

# markdown-it-py's input normalisation (rules_core/normalize.py): the reference's line numbers
# count these newlines, so the Rust parser is handed the same text.
_NEWLINES = re.compile(r"\r\n?")
# Every line that could open a footnote definition for the reference (label: no space, up to
# the first "]"), in any container. The Rust tree must hold exactly these labels, or the two
# parsers disagree on which footnotes exist.
_DEF_CANDIDATE = re.compile(r"\[\^([^\] \n]+)\]:")

# A delimiter row without a pipe under a line with one: markdown-it-py's table rule accepts it
# (a one-column table), the Rust port does not.
_ONE_COLUMN_TABLE = re.compile(r"(?m)^[^\n]*\|[^\n]*\n[ \t]*:?-+:?[ \t]*$")
_NON_ASCII_DELIMITER = re.compile(r"[^\x00-\x7f][*_]|[*_][^\x00-\x7f]")
# A line that may open another block: markdown-it-py ends a table there, the Rust port may not.
_BLOCK_START = re.compile(r" {0,3}(?:[>#<~\-+*`]|\d+[.)])| {4}|\t")
_DELIMITER_ROW = re.compile(r"(?m)^(?=[^\n]*\|)(?=[^\n]*-)[ \t|:-]+$")
_LOWERCASE_DECLARATION = re.compile(r"<![a-z]")
# A backtick run, or a backslash escape (an escaped backtick opens nothing).
_BACKTICKS = re.compile(r"\\.|`+")

_INLINE = frozenset({
    "text", "text_special", "softbreak", "hardbreak", "link", "image", "em", "strong",
    "code_inline", "html_inline", "autolink", "footnote_ref", "footnote_ref_anchor",
})
_CONTAINERS = frozenset({"blockquote", "bullet_list", "ordered_list", "list_item"})
_SKIPPED_BLOCKS = frozenset({"fence", "code_block", "html_block", "hr", "definition"})
_BREAKS = frozenset({"softbreak", "hardbreak"})
_NESTED = frozenset({"link", "em", "strong"})  # markdown-it-py flattens these into one list


class _Fallback(Exception):
    """The tree holds something the reference's answer cannot be rebuilt from."""


def parse_markdown_fast(doc: Document) -> MarkdownFacts | None:
    """The reference's facts for ``doc`` from the Rust tree, or ``None`` to use the reference."""
    body = doc.body if doc.parse_error is None else ""
    if not body:
        return MarkdownFacts((), (), (), (), ())
    src = _NEWLINES.sub("\n", body).replace("\0", "\ufffd")
    if "^[" in src:
        return None  # inline footnotes: the reference numbers and labels them its own way
    if _LOWERCASE_DECLARATION.search(src):
        return None  # "<!x ...>" is raw HTML (inline or block) for markdown-it-py only
    if _ONE_COLUMN_TABLE.search(src):
        return None  # a table the Rust port reads as a setext heading
    if _may_panic(src):
        return None
    try:
        return _Extractor(doc, src).run()
    except _Fallback:
        return None


def _tree(src: str) -> Node:
    try:
        return _PARSER.tree(src)
    except BaseException as exc:
        # A Rust panic reaches Python as pyo3's PanicException, a BaseException subclass that
        # cannot be imported by name; only that one is turned into a fallback.
        if type(exc).__module__ == "pyo3_runtime" and type(exc).__name__ == "PanicException":
            raise _Fallback from exc
        raise


def _may_panic(src: str) -> bool:
    """Known crash of markdown-it 0.6 (code_pair.rs): an unclosed backtick run after a ``[``.

    The panic is caught anyway (:func:`_tree`), but Rust prints it to stderr first, so the
    documents that can trigger it go to the reference directly. The check is per line, and per
    cell on a line that may be a table row, finer than any inline content, so it errs towards
    the reference. A line may be a table row when its block (the lines between two blank ones)
    holds a delimiter row, in any container; elsewhere a ``|`` is text (``WS_CHILD |
    WS_VISIBLE`` in a code span), and cutting there sent 42 of cpp-docs' pages to the
    reference whose lines all pair.
    """
    if "`" not in src or "[" not in src:
        return False
    lines = src.split("\n")
    rows = _table_block_lines(lines) if "|" in src else frozenset()
    for n, line in enumerate(lines):
        if "`" not in line or "[" not in line:
            continue
        for segment in line.split("|") if n in rows else (line,):
            if "[" in segment and _unpaired_backticks(segment):
                return True
    return False


# A line that may be a table's delimiter row once a container's markers are taken off: only
# pipes, colons, dashes and blanks, with a dash.
_DELIMITER_LIKE = re.compile(r"[ \t>]*(?:(?:[-+*]|\d+[.)])[ \t]+)*[ \t|:-]*-[ \t|:-]*")


def _table_block_lines(lines: Sequence[str]) -> frozenset[int]:
    """The numbers of the lines in a block (a run of lines that are not blank) holding a line
    that may be a delimiter row: every line a table's row could be on."""
    rows: set[int] = set()
    block: list[int] = []
    for n, line in enumerate([*lines, ""]):
        if line.strip(" \t"):
            block.append(n)
            continue
        if any(_DELIMITER_LIKE.fullmatch(lines[m]) for m in block):
            rows.update(block)
        block = []
    return frozenset(rows)


def _unpaired_backticks(segment: str) -> bool:
    runs = [len(m.group()) for m in _BACKTICKS.finditer(segment) if m.group()[0] == "`"]
    i = 0
    while i < len(runs):
        # The next run of the same length closes this one; the runs between are code.
        close = next((j for j in range(i + 1, len(runs)) if runs[j] == runs[i]), None)
        if close is None:
            return True
        i = close + 1
    return False


class _Extractor:
    def __init__(self, doc: Document, src: str) -> None:
        self.doc = doc
        self.src = src
        self.data = src.encode()
        # Source maps are UTF-8 byte offsets; a line is the count of "\n" bytes before one.
        self.newlines = [m.start() for m in re.finditer(b"\n", self.data)]
        self.offset = doc.body_line
        self.source_dir = doc.path.rpartition("/")[0]
        self.links: list[Link] = []
        self.refs: list[FootnoteRef] = []
        self.headings: list[tuple[int, int, str]] = []
        self.tables = 0
        self.ref_order: list[tuple[int, str]] = []  # (byte offset, label) of every reference

    def run(self) -> MarkdownFacts:
        tree = _tree(self.src)
        container: Node | None = None
        for node in tree.children:
            if node.name == "footnote_container":
                container = node
            else:
                self._block(node)
        defs = self._footnotes(container)
        if self.tables != len(_DELIMITER_ROW.findall(self.src)):
            # markdown-it-py tries a table before every other block (a fence, a list item),
            # the Rust port after them: every delimiter row must be one table in both.
            raise _Fallback
        sections = build_sections(self.doc, self.headings)
        return MarkdownFacts(
            tuple(self.links), sections, anchors_of(sections), tuple(self.refs), defs)

    # -- lines ---------------------------------------------------------------------------------

    def _line(self, node: Node) -> int:
        if node.srcmap is None:
            raise _Fallback
        return bisect.bisect_left(self.newlines, node.srcmap[0]) + self.offset

    # -- blocks --------------------------------------------------------------------------------

    def _block(self, node: Node) -> None:
        name = node.name
        if name == "paragraph":
            self._inline_run(node.children, self._line(node))
        elif name in ("heading", "lheading"):
            level = node.meta.get("level")
            if not isinstance(level, int):
                raise _Fallback
            if _NON_ASCII_DELIMITER.search(self._slice(node)):
                # Whether "*" or "_" next to a non-ASCII character opens emphasis depends on
                # the Unicode punctuation table, which the two ports do not share.
                raise _Fallback
            self.headings.append((self._line(node), level, _heading_text(node.children, self)))
            self._inline_run(node.children, self._line(node))
        elif name in _CONTAINERS:
            if any(c.name == "html_block" for c in node.children):
                # Where raw HTML ends inside a list item or quote (lazy lines) differs between
                # the ports.
                raise _Fallback
            self._container(node.children)
        elif name == "table":
            self.tables += 1
            self._check_table_end(node)
            for row in _rows(node):
                for cell in row.children:
                    if cell.name != "tcell":
                        raise _Fallback
                    self._inline_run(cell.children, self._line(row))
        elif name not in _SKIPPED_BLOCKS:
            raise _Fallback

    def _check_table_end(self, table: Node) -> None:
        """The two ports end a table alike only at a blank line or the end, past plain rows."""
        if table.srcmap is None:
            raise _Fallback
        start, end = table.srcmap
        first = bisect.bisect_left(self.newlines, start)
        last = bisect.bisect_left(self.newlines, max(end - 1, start))
        lines = self.src.split("\n")  # cheap next to the parse; tables are rare
        if last + 1 < len(lines) and lines[last + 1].strip(" \t"):
            raise _Fallback
        if any(_BLOCK_START.match(line) for line in lines[first + 2 : last + 1]):
            raise _Fallback

    def _container(self, children: Sequence[Node]) -> None:
        # A tight list item holds its paragraph's inline nodes directly: each run of them is
        # one paragraph, which the reference numbers from its first line.
        run: list[Node] = []
        for child in children:
            if child.name in _INLINE:
                run.append(child)
                continue
            if run:
                self._inline_run(run, self._line(run[0]))
                run = []
            self._block(child)
        if run:
            self._inline_run(run, self._line(run[0]))

    # -- inline --------------------------------------------------------------------------------

    def _inline_run(self, nodes: Sequence[Node], line: int, into_refs: bool = True) -> int:
        """Links and footnote references, numbered as the reference numbers them.

        The reference counts breaks and newlines inside raw HTML from the block's first line
        (never newlines inside a code span), and never looks inside an image.
        """
        first = _content(nodes[0]) if nodes and nodes[0].name == "text" else ""
        if first[:1].isspace():
            # Left by the Rust port, which trims ASCII blanks only; markdown-it-py strips every
            # Unicode space (str.strip) and with it the line breaks it counts lines by.
            raise _Fallback
        if first.startswith("["):
            if any(n.name == "text" and "]:" in _content(n) for n in nodes):
                raise _Fallback  # a link reference definition the Rust port refused: see _text
        for node in nodes:
            name = node.name
            if name == "text":
                _text(node)
            elif name in _BREAKS:
                line += 1
            elif name == "html_inline":
                line += _content(node).count("\n")
            elif name == "footnote_ref":
                label = node.meta.get("label")
                if not isinstance(label, str) or node.srcmap is None:
                    raise _Fallback
                self.ref_order.append((node.srcmap[0], label))
                if into_refs:
                    # Interned as the reference interns it: labels recur across a bundle.
                    self.refs.append(FootnoteRef(sys.intern(label), line))
            elif name == "link":
                url = node.meta.get("url")
                if not isinstance(url, str):
                    raise _Fallback
                if node.srcmap is None:
                    raise _Fallback
                start, end = node.srcmap
                # An inline link ends with its ")", a reference link with "]".
                inline = self.data[end - 1 : end] == b")"
                if "%" in url and not outside_bundle(url):
                    # The Rust port percent-encodes destinations, the reference keeps them as
                    # written. An inline link written with no "%" (nor "&", which may spell
                    # one) had every escape added by the port: undone, it is as written.
                    # Any other may have been written either way. A destination outside the
                    # bundle (a URL, an anchor) is no link either way.
                    if not inline or any(c in self.data[start:end] for c in b"%&"):
                        raise _Fallback
                    url = unquote(url)
                if not inline and self.data[end : end + 1] == b"(":
                    # "[ref](" with no inline link after it: markdown-it-py gives up on the
                    # link, the Rust port falls back to the reference definition.
                    raise _Fallback
                link = resolve_link(url, self.source_dir, line)
                if link is not None:
                    self.links.append(link)
                line = self._inline_run(node.children, line, into_refs)
            elif name in _NESTED:
                line = self._inline_run(node.children, line, into_refs)
            elif name == "image":
                self._image_refs(node.children)
            elif name not in _INLINE:
                raise _Fallback
        return line

    def _image_refs(self, nodes: Sequence[Node]) -> None:
        # The reference never reads an image's children, but markdown-it-py numbered the
        # footnotes referenced there, which orders the definitions.
        for node in nodes:
            if node.name == "footnote_ref":
                label = node.meta.get("label")
                if not isinstance(label, str) or node.srcmap is None:
                    raise _Fallback
                self.ref_order.append((node.srcmap[0], label))
            self._image_refs(node.children)

    # -- footnotes -----------------------------------------------------------------------------

    def _footnotes(self, container: Node | None) -> tuple[FootnoteDef, ...]:
        bodies: dict[str, Node] = {}
        for node in container.children if container is not None else ():
            label = node.meta.get("label")
            if node.name != "footnote_def" or not isinstance(label, str) or label in bodies:
                raise _Fallback
            if not node.children or any(c.name != "paragraph" for c in node.children):
                raise _Fallback  # empty or block-level bodies: the reference's text is quirky
            bodies[label] = node
        if sorted(_DEF_CANDIDATE.findall(self.src)) != sorted(bodies):
            raise _Fallback
        # Scan every body first: references inside a definition count for the order too.
        scanned: dict[str, tuple[list[Link], list[FootnoteRef]]] = {}
        for label, node in bodies.items():
            links, refs = self.links, self.refs
            self.links, self.refs = [], []
            for para in node.children:
                self._inline_run(para.children, self._line(para))
            scanned[label] = (self.links, self.refs)
            self.links, self.refs = links, refs
        # The reference moves definitions to the end in the order their label is first
        # referenced anywhere, and drops those never referenced.
        order: list[str] = []
        for _, label in sorted(self.ref_order):
            if label not in order:
                order.append(label)
        defs: list[FootnoteDef] = []
        for label in order:
            body = bodies.get(label)
            if body is None:
                raise _Fallback
            first = body.children[0]
            text = self._slice(first)
            if "\n" in text:
                raise _Fallback  # the reference joins continuation lines its own way
            defs.append(FootnoteDef(sys.intern(label), self._line(first), text.strip()))
            links, refs = scanned[label]
            self.links.extend(links)
            self.refs.extend(refs)
        return tuple(defs)

    def _slice(self, node: Node) -> str:
        if node.srcmap is None:
            raise _Fallback
        start, end = node.srcmap
        return self.data[start:end].decode()


def _rows(table: Node) -> Iterable[Node]:
    for part in table.children:
        if part.name not in ("thead", "tbody"):
            raise _Fallback
        yield from part.children


def _text(node: Node) -> str:
    """A text node's content; refuses text that is a link the Rust port dropped.

    The Rust port's link validation cannot be turned off: a ``javascript:``, ``vbscript:``,
    ``file:`` or non-image ``data:`` destination (however it is spelled: entities, case) leaves
    the link as text, ``[a](javascript:x)``, and its definition as a paragraph, where the
    reference has a link (its text counts in a heading). Text holding ``](`` is either that or
    a malformed link both parsers leave as text; the reference decides.
    """
    content = _content(node)
    if "](" in content:
        raise _Fallback
    return content


def _content(node: Node) -> str:
    content = node.meta.get("content")
    if not isinstance(content, str):
        raise _Fallback
    return content


def _heading_text(nodes: Sequence[Node], ex: _Extractor) -> str:
    """markdown-it-py's heading text (``markdown._inline_text``) rebuilt from the Rust nodes."""
    parts: list[str] = []
    _collect_text(nodes, ex, parts)
    return "".join(parts).strip()


def _collect_text(nodes: Sequence[Node], ex: _Extractor, parts: list[str]) -> None:
    for node in nodes:
        name = node.name
        if name == "text":
            parts.append(_text(node))
        elif name in ("text_special", "html_inline"):
            parts.append(_content(node))
        elif name == "code_inline":
            parts.append("".join(_content(c) for c in node.children))
        elif name in _BREAKS:
            parts.append(" ")
        elif name == "image":
            parts.append(_image_label(node, ex))
        elif name == "autolink":
            # The reference shows an autolink as its link text, normalizeLinkText(destination).
            raw = ex._slice(node)
            parts.append(markdown_parser().normalizeLinkText(raw[1:-1]))
        elif name in _NESTED:
            _collect_text(node.children, ex, parts)
        elif name != "footnote_ref":
            raise _Fallback


def _image_label(node: Node, ex: _Extractor) -> str:
    """The image's label as written: markdown-it-py's ``image.content``."""
    if node.srcmap is None:
        raise _Fallback
    start = node.srcmap[0] + 2  # after "!["
    if node.children:
        last = node.children[-1].srcmap
        if last is None:
            raise _Fallback
        end = last[1]
    else:
        end = start
    if ex.data[end : end + 1] != b"]":
        raise _Fallback
    return ex.data[start:end].decode()
