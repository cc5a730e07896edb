"""``bundle-mcp view``: a bundle as one self-contained, offline HTML page.

``data.py`` gathers what the page shows from one snapshot (through the okf rules and the
validator), ``markdown_html.py`` renders concept bodies safely, ``layout.py`` places the graph,
``page.py`` assembles the file with the vendored libraries of ``vendor/`` (see its
``MANIFEST.json`` and ``scripts/vendor_viewer_js.py``), ``serve.py`` serves it live on loopback
and ``command.py`` is the command line. docs/VIEWER.md describes the page.
"""

from __future__ import annotations

from .data import DEFAULT_NODE_BUDGET, ViewOptions, page_data
from .page import build_page, render_page

__all__ = ["DEFAULT_NODE_BUDGET", "ViewOptions", "build_page", "page_data", "render_page"]
