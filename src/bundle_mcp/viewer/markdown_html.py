"""A concept's Markdown body as HTML that cannot run anything, for the viewer's detail pane.

The syntax is the one OKF means (:func:`bundle_mcp.okf.markdown.markdown_parser`: CommonMark plus
tables and footnotes), but rendered with raw HTML off: an HTML block or tag in the body is shown
as text, never parsed. Every link is then decided here, never by the browser:

- ``http:``, ``https:`` and ``mailto:`` destinations keep an ``href`` (percent-encoded, opening in
  a new tab without a referrer);
- a relative or bundle-rooted destination that names a concept becomes ``#concept=ID`` (the
  page selects that concept), one that names a folder or a folder's ``index.md`` becomes
  ``#folder=PATH``, and a ``#fragment`` alone scrolls within the concept;
- anything else (another scheme such as ``javascript:``, ``//host``, an asset, a broken link)
  keeps its text inside a ``<span>`` with no ``href`` at all, and a title that says why.

Images are never loaded (the page fetches nothing): each one is its alt text in a ``<span>``. The
page sanitises this HTML once more in the browser (DOMPurify) under a Content-Security-Policy
that allows no network request, so a mistake here still cannot run or fetch anything.
"""

from __future__ import annotations

import functools
import posixpath
import re
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

from markdown_it import MarkdownIt
from markdown_it.common.normalize_url import normalizeLink
from markdown_it.common.utils import escapeHtml
from markdown_it.renderer import RendererHTML
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict
from mdit_py_plugins.footnote import footnote_plugin

from ..model import INDEX, Document, Snapshot
from ..okf.markdown import SlugCounter, resolve_link

# A heading's id in the pane: prefixed, so a heading named like a page element or a document
# property ("search", "cookie") can clobber neither.
ANCHOR_PREFIX = "h-"
# Bodies past this are cut (with a note): the page stays a size a browser opens quickly.
MAX_BODY_CHARS = 200_000
SAFE_SCHEMES = frozenset({"http", "https", "mailto"})

_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):")
_BREAKS = ("softbreak", "hardbreak")


@functools.lru_cache(maxsize=1)
def _renderer() -> MarkdownIt:
    """OKF's Markdown with raw HTML off; destinations are kept as written (like the okf parser)
    so that this module, not markdown-it's defaults, decides what each link may become."""
    md = MarkdownIt("commonmark", {"html": False}).enable("table").use(footnote_plugin)
    md.validateLink = lambda url: True  # type: ignore[method-assign]
    md.normalizeLink = lambda url: url  # type: ignore[method-assign]
    md.add_render_rule("image", _image)
    return md


def _image(
    self: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    token = tokens[idx]
    alt = self.renderInlineAsText(token.children or [], options, env) or "image"
    src = str(token.attrs.get("src", ""))
    return (f'<span class="okf-image" title="{escapeHtml("image, not loaded: " + src)}">'
            f"[{escapeHtml(alt)}]</span>")


def concept_hash(concept_id: str, fragment: str | None = None) -> str:
    """The page address that selects a concept (and scrolls to ``fragment`` in it)."""
    target = "#concept=" + quote(concept_id, safe="/")
    return target + ("&at=" + quote(fragment, safe="") if fragment else "")


def folder_hash(folder: str) -> str:
    return "#folder=" + quote(folder, safe="/")


def render_body(doc: Document, snapshot: Snapshot) -> str:
    """``doc``'s body as safe HTML (see the module docstring); empty for an empty body."""
    body = doc.body
    if not body.strip():
        return ""
    cut = len(body) > MAX_BODY_CHARS
    if cut:
        body = body[:MAX_BODY_CHARS]
    md = _renderer()
    env: dict[str, Any] = {}
    tokens = md.parse(body, env)
    slugs = SlugCounter()
    source_dir = posixpath.dirname(doc.path)
    for i, token in enumerate(tokens):
        if token.type == "heading_open" and i + 1 < len(tokens):
            token.attrSet("id", ANCHOR_PREFIX + slugs.slug(_heading_text(tokens[i + 1])))
        elif token.type == "inline" and token.children:
            _rewrite_links(token.children, doc, source_dir, snapshot)
    html = str(md.renderer.render(tokens, md.options, env))
    if cut:
        html += (f'<p class="okf-cut">The body is longer than {MAX_BODY_CHARS:,} characters; '
                 "the rest is not shown here.</p>")
    return html


def _heading_text(token: Token) -> str:
    # The text the okf parser slugs a heading from (okf/markdown.py), so that a link's
    # #fragment finds the heading its anchor check found.
    parts = []
    for child in token.children or []:
        if child.type in ("text", "code_inline", "image"):
            parts.append(child.content)
        elif child.type in _BREAKS:
            parts.append(" ")
    return "".join(parts).strip()


def _rewrite_links(children: list[Token], doc: Document, source_dir: str,
                   snapshot: Snapshot) -> None:
    """Give each link the ``href`` (or the ``<span>``) :func:`link_attributes` decides."""
    open_spans: list[bool] = []  # per open link: was it turned into a span?
    for child in children:
        if child.type == "link_open":
            href = str(child.attrs.get("href", ""))
            attrs = link_attributes(href, doc, source_dir, snapshot)
            child.attrs = dict(attrs)
            is_span = "href" not in attrs
            if is_span:
                child.tag = "span"
            open_spans.append(is_span)
        elif child.type == "link_close" and open_spans and open_spans.pop():
            child.tag = "span"


def link_attributes(
    href: str, doc: Document, source_dir: str, snapshot: Snapshot
) -> dict[str, str]:
    """The attributes a link is rendered with; without ``href`` it is rendered as a span."""
    dest = href.strip()
    scheme = _SCHEME.match(dest)
    if scheme is not None:
        name = scheme.group(1).lower()
        if name in SAFE_SCHEMES:
            url = normalizeLink(dest)
            # normalizeLink only percent-encodes; the scheme it leaves is the one checked.
            if url.lower().startswith(name + ":"):
                return {"href": url, "class": "okf-external", "target": "_blank",
                        "rel": "noopener noreferrer nofollow"}
        return {"class": "okf-unsafe", "title": f"not followed: a {name}: link"}
    if dest.startswith("//"):
        return {"class": "okf-unsafe", "title": "not followed: a link to another host"}
    if dest.startswith("#"):
        fragment = dest[1:]
        if doc.concept_id is not None and fragment:
            return {"href": concept_hash(doc.concept_id, fragment), "class": "okf-anchor",
                    "data-anchor": fragment}
        return {"class": "okf-anchor"}
    link = resolve_link(dest, source_dir, 0)
    if link is None or link.target is None:
        return {"class": "okf-broken", "title": f"broken link: {dest}"}
    if link.concept_id is not None and link.concept_id in snapshot.concepts \
            and not link.is_directory:
        attrs = {"href": concept_hash(link.concept_id, link.fragment), "class": "okf-concept",
                 "data-concept": link.concept_id}
        if link.fragment:
            attrs["data-anchor"] = link.fragment
        return attrs
    folder = _folder_of(link.target, link.is_directory, snapshot)
    if folder is not None:
        return {"href": folder_hash(folder), "class": "okf-folder", "data-folder": folder}
    if link.target in snapshot.assets or link.target in snapshot.documents:
        return {"class": "okf-asset", "title": f"a file of the bundle, not shown here: "
                f"{link.target}"}
    return {"class": "okf-broken", "title": f"broken link: {dest}"}


def _folder_of(target: str, is_directory: bool, snapshot: Snapshot) -> str | None:
    """The folder a link names: a folder itself, or a folder's ``index.md``."""
    if (is_directory or target == "") and (target == "" or target in snapshot.directories):
        return target
    doc = snapshot.documents.get(target)
    if doc is not None and doc.kind == INDEX:
        return posixpath.dirname(target)
    return None
