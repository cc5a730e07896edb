"""Time Markdown parsers on every concept body of a bundle.

Why the fast path: docs/decisions/loading.md (Markdown parsing); the figures:
bench/results/2026-12-03-decision-figures.md.

    python bench/markdown_parsers.py /tmp/b10k ../shared/corpora

Each row parses every body once per run; the figure is the median of three runs in this process.
Bodies are cut by the loader (frontmatter removed), exactly what ``parse_markdown`` is handed.
pyromark and cmarkgfm are only compared here, never used: ``pip install pyromark cmarkgfm`` first.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bundle_mcp.loader.document import parse_document
from bundle_mcp.model import Document
from bundle_mcp.okf import markdown as reference
from bundle_mcp.okf.markdown_facts import parse_markdown


def documents(root: Path) -> list[Document]:
    out = []
    for dirpath, _, files in os.walk(root):
        for name in sorted(files):
            if name.endswith(".md"):
                path = Path(dirpath, name)
                doc = parse_document(str(path.relative_to(root)), path.read_bytes())
                if doc.parse_error is None and doc.body:
                    out.append(doc)
    return out


def parsers() -> dict[str, Callable[[str], object]]:
    import cmarkgfm
    import pyromark

    from bundle_mcp.okf import markdown_fast

    def rs_tree(text: str) -> object:
        try:
            return markdown_fast._tree(text)
        except markdown_fast._Fallback:
            return None  # markdown-it 0.6 panics on some real documents (docs/decisions/loading.md)

    py = reference.markdown_parser()
    opts = pyromark.Options.ENABLE_TABLES | pyromark.Options.ENABLE_FOOTNOTES
    return {
        "markdown-it-py (tokens)": py.parse,
        "markdown-it-pyrs (tree)": rs_tree,
        "pyromark (events with byte ranges)": lambda s: tuple(
            pyromark.events_with_range(s, options=opts)
        ),
        # The binding exposes no node accessors (no URL, no source position), only parse and
        # render, so this is parse + HTML render: the best it can offer the loader.
        "cmarkgfm (parse + render)": cmarkgfm.github_flavored_markdown_to_html,
    }


def median_seconds(fn: Callable[[Any], object], texts: list[Any], runs: int = 3) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        for text in texts:
            fn(text)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("roots", nargs="+", type=Path)
    ap.add_argument("--only", default="", help="substring of the parser names to run")
    args = ap.parse_args()
    docs = {str(root): documents(root) for root in args.roots}
    for name, found in docs.items():
        mb = sum(len(d.body.encode()) for d in found) / 1e6
        print(f"{name}: {len(found)} bodies, {mb:.1f} MB", flush=True)
    print("| parser | " + " | ".join(docs) + " |")
    print("|---|" + "---|" * len(docs))
    for label, fn in parsers().items():
        if args.only in label:
            cells = [median_seconds(fn, [d.body for d in found]) for found in docs.values()]
            print(f"| {label} | " + " | ".join(f"{c:.2f} s" for c in cells) + " |", flush=True)
    # The whole extraction (tokens or tree to MarkdownFacts), from the loaded document.
    from bundle_mcp.okf import markdown_fast
    from bundle_mcp.okf.markdown import parse_markdown_reference

    whole: dict[str, Callable[[Document], object]] = {
        "MarkdownFacts, reference (markdown-it-py)": parse_markdown_reference,
        "MarkdownFacts, fast path (markdown-it-pyrs, with its fallbacks)": parse_markdown,
    }
    for label, doc_fn in whole.items():
        if args.only in label:
            cells = [median_seconds(doc_fn, found) for found in docs.values()]
            print(f"| {label} | " + " | ".join(f"{c:.2f} s" for c in cells) + " |", flush=True)
    for name, found in docs.items():
        declined = sum(markdown_fast.parse_markdown_fast(d) is None for d in found)
        print(f"{name}: fast path declined {declined} of {len(found)} documents")


if __name__ == "__main__":
    main()
