"""The compiled Markdown path gives exactly the reference's facts, or hands the document back.

``okf/markdown_fast.py`` (markdown-it-pyrs) serves the hot path; ``okf/markdown.py``'s
``parse_markdown_reference`` (markdown-it-py) is the reference. For every document checked here the
fast path either returns ``None`` (the caller then parses with the reference) or the very same
``MarkdownFacts``: links with lines, sections, anchors, footnote references and definitions. Why
the fast path exists and where it falls back is in docs/decisions/loading.md (Markdown parsing).
"""

from __future__ import annotations

import importlib.util
import itertools
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from bundle_mcp.loader.document import parse_document
from bundle_mcp.model import Document
from bundle_mcp.okf.markdown import parse_markdown_reference
from bundle_mcp.okf.markdown_facts import parse_markdown

markdown_fast = pytest.importorskip("bundle_mcp.okf.markdown_fast")

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
CORPUS_SAMPLE = 300


def document(path: str, data: bytes) -> Document:
    return parse_document(path, data)


def disagreement(doc: Document) -> str | None:
    """``None`` when the paths agree (or the fast path declines), else what differs."""
    fast = markdown_fast.parse_markdown_fast(doc)
    if fast is None:
        return None
    reference = parse_markdown_reference(doc)
    if fast == reference:
        return None
    fields = [
        name
        for name in ("links", "sections", "anchors", "footnote_refs", "footnote_defs")
        if getattr(fast, name) != getattr(reference, name)
    ]
    return f"{doc.path}: {', '.join(fields)} differ"


def markdown_files(folder: Path) -> Iterator[Path]:
    for path in sorted(folder.rglob("*.md")):
        if "node_modules" not in path.parts:
            yield path


def check_files(paths: list[Path], base: Path) -> tuple[int, int]:
    """Every file agrees; returns (documents checked, documents the fast path answered)."""
    problems, answered = [], 0
    for path in paths:
        doc = document(str(path.relative_to(base)), path.read_bytes())
        problem = disagreement(doc)
        if problem is not None:
            problems.append(problem)
        elif markdown_fast.parse_markdown_fast(doc) is not None:
            answered += 1
    assert problems == []
    return len(paths), answered


# -- the project's own Markdown and the conformance fixtures -------------------------------------


@pytest.mark.parametrize("folder", ["tests", "testdata", "examples"])
def test_project_markdown_agrees(folder: str) -> None:
    paths = list(markdown_files(ROOT / folder))
    checked, _ = check_files(paths, ROOT)
    assert checked == len(paths)


def test_conformance_fixtures_agree() -> None:
    folder = SHARED / "conformance"
    if not folder.is_dir():
        pytest.skip(f"the shared conformance fixtures are not at {folder}")
    checked, _ = check_files(list(markdown_files(folder)), folder)
    assert checked > 0


# -- the real corpora ----------------------------------------------------------------------------


def corpus_sample(folder: Path, size: int = CORPUS_SAMPLE) -> list[Path]:
    """Every k-th file in path order: deterministic, and spread over the whole corpus."""
    paths = list(markdown_files(folder))
    step = max(1, len(paths) // size)
    return paths[::step][:size]


def corpora() -> list[str]:
    folder = SHARED / "corpora"
    return sorted(p.name for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []


@pytest.mark.parametrize("corpus", corpora() or ["(none)"])
def test_corpus_sample_agrees(corpus: str) -> None:
    folder = SHARED / "corpora" / corpus
    if not folder.is_dir():
        pytest.skip(f"the shared corpora are not at {SHARED / 'corpora'}")
    checked, answered = check_files(corpus_sample(folder), folder)
    # The fast path must serve most real documents, or it is not worth its keep.
    assert answered >= 0.9 * checked


# -- a generated bundle --------------------------------------------------------------------------


def test_generated_bundle_agrees_and_never_falls_back(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("okf_generate", ROOT / "bench" / "generate.py")
    assert spec is not None and spec.loader is not None
    generate = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = generate  # its dataclasses look their module up
    try:
        spec.loader.exec_module(generate)
    finally:
        del sys.modules[spec.name]
    generate.generate(tmp_path, 300)
    checked, answered = check_files(list(markdown_files(tmp_path)), tmp_path)
    assert checked > 300
    assert answered == checked


# -- hostile Markdown ----------------------------------------------------------------------------

# Pieces that hit the places where the two ports differ or where line numbers are easy to get
# wrong: breaks, raw HTML over lines, code, tables, footnotes, references, entities, escapes,
# non-ASCII text, CR/CRLF, BOM, NUL, tabs, containers.
PIECES = [
    "[", "]", "(", ")", "`", "``", "*", "_", "**", "<", ">", "!", "^", ":", "|", "-", "#", "# ",
    "## ", "\n", "\n\n", " ", "  ", "\t", "\\", "&amp;", "&#32;", "&copy;", "é", "日本", "x",
    "word ", "a.md", "../b.md", "#frag", "<span>", "</span>", "<a\nhref=x>", "<!-- c\n-->",
    "[^1]", "[^1]: note ", "[^x]:", "http://x.y", "<http://x.y>", "<a@b.c>", "\r\n", "\r",
    "    ", "```", "~~~", "> ", "- ", "* ", "1. ", "2) ", "===", "---", "[ref]: r.md",
    "[ref]", "[Ref]", "![img](i.png)", "![a *b*](c.md)", "%20", "javascript:", ' "t"',
    "[l](l.md)", "[l](<a b.md>)", "[l](a\\_b.md)", "[l](a&amp;b.md)", "](", "\n[^1]: d [d](d.md)\n",
    "| a | b |\n|---|---|\n", "| [c](c.md) | `d` |\n", "\\\n", "Setext\n---\n", "<div>\n",
    "</div>\n", "`code [no](no.md)`", "\u00a0", "\ufeff", "\0", "[x]: <y z>\n", "[^2]: two\n",
    "[^2]", "+ ", "*x*", "_y_", "<br>", "\n  ", "\n    ", "[a](b.md 'x')", "[a](/abs.md)",
    "[a](dir/)", "[a](?q)", "[a](b.md#f%C3%A9)", "^[inline]", "![**b**](i.png)", "![a[^1]](i.png)",
]
FRONTMATTER = "---\ntitle: t\n---\n"


@st.composite
def hostile_markdown(draw: st.DrawFn) -> str:
    pieces = draw(st.lists(st.sampled_from(PIECES), max_size=40))
    free = draw(st.text(max_size=20))
    head = FRONTMATTER if draw(st.booleans()) else ""
    return head + "".join(pieces) + free


def assert_agrees(text: str) -> None:
    doc = document("d/x.md", text.encode("utf-8", "surrogatepass"))
    assert disagreement(doc) is None
    assert parse_markdown(doc) == parse_markdown_reference(doc)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hostile_markdown())
@example("|&copy;[^1]`code`Setext\n---\n")  # a one-column table for markdown-it-py only
@example("\u00a0\n  <http://x.y>\n[l](l.md)")  # Unicode space before a paragraph
@example("_y_\0Setext\n---\n")  # emphasis next to U+FFFD
@example("\n  ```1. (\\| a | b |\n|---|---|\n\n[l](l.md)")  # a table before a fence
@example("x ![a[^1]](i.png) [^2]\n\n[^2]: two\n[^1]: one\n")  # a reference inside an image
@example("+ [l](l.md)<!x&copy;\n> [l](a.md)")  # a lowercase declaration
def test_hostile_markdown_agrees(text: str) -> None:
    assert_agrees(text)


@pytest.mark.slow
@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hostile_markdown())
def test_hostile_markdown_agrees_long_run(text: str) -> None:
    assert_agrees(text)


# -- each known divergence is declined, not guessed at ------------------------------------------

DIVERGENT = {
    # The Rust port percent-encodes destinations ("a b" and "a%20b" both become "a%20b"):
    # a destination written with "%", or a reference link's (written elsewhere), may have
    # been written either way.
    "percent in a destination": "[l](a%20b.md)\n",
    "percent in a definition": "[l][r]\n\n[r]: <a b.md>\n",
    "an entity that may spell a percent": "[l](<a&#32;b.md>)\n",
    # It drops links it deems unsafe and leaves them as text; markdown-it-py keeps them.
    "dropped scheme": "# [a](javascript:x) b\n",
    "dropped definition": "[b][r]\n\n[r]: &#106;avascript:y\n",
    # markdown-it-py gives up on "[ref](" when no inline link follows; the Rust port does not.
    "reference before a parenthesis": "[Ref](\n\n[ref]: r.md\n",
    # A one-column table (no pipe in the delimiter row) is a setext heading for the Rust port.
    "one-column table": "|a\n---\n",
    # markdown-it-py tries a table before a fence.
    "table before a fence": "```x | a |\n|---|---|\n",
    # A lowercase declaration, "<!x ... >": raw HTML for markdown-it-py only.
    "lowercase declaration": "[l](l.md)<!x [m](m.md)\n>\n",
    # A table that ends at a line opening another block.
    "table end": "| a | b |\n|---|---|\n+ \n    [a](b.md)\n",
    # Raw HTML in a list item: the ports end it at different lines.
    "html in a list": "+ <!x\nSetext\n---\n",
    # markdown-it-py strips Unicode spaces off a paragraph, with the line breaks it counts.
    "Unicode space": "\u00a0\n[l](l.md)\n",
    # Emphasis next to a non-ASCII character in a heading (the Unicode punctuation tables).
    "emphasis next to non-ASCII": "# _y_\u00e9\n",
    # Inline footnotes: markdown-it-py labels them "None" and numbers their lines from 0.
    "inline footnote": "a^[note [l](l.md)]\n",
    # A footnote whose body is not paragraphs, or whose first paragraph spans lines.
    "block footnote": "a[^1]\n\n[^1]:\n    - item\n",
    "multi-line footnote": "a[^1]\n\n[^1]: one\n    two\n",
    # markdown-it 0.6 (Rust) panics on an unclosed code span after "[".
    "Rust panic": "[`x\n",
    "Rust panic after an escaped backtick": "[\\`x`](y.md)\n",
}


@pytest.mark.parametrize("name", sorted(DIVERGENT))
def test_known_divergences_fall_back(name: str, capfd: pytest.CaptureFixture[str]) -> None:
    doc = document("d/x.md", DIVERGENT[name].encode())
    assert markdown_fast.parse_markdown_fast(doc) is None
    assert parse_markdown(doc) == parse_markdown_reference(doc)
    # Known panics are declined before the parse: Rust prints nothing on the server's stderr.
    assert "panicked" not in capfd.readouterr().err


def test_a_rust_panic_becomes_a_fallback() -> None:
    # _may_panic keeps known triggers away from the parser; the panic itself is still caught.
    with pytest.raises(markdown_fast._Fallback):
        markdown_fast._tree("e||\n-|-\n[`")


def test_the_hot_path_is_the_fast_path() -> None:
    doc = document("d/x.md", b"# T\n\nSee [a](a.md) and[^1].\n\n[^1]: A note.\n")
    facts = markdown_fast.parse_markdown_fast(doc)
    assert facts is not None and facts == parse_markdown(doc) == parse_markdown_reference(doc)
    assert [link.raw for link in facts.links] == ["a.md"]
    assert [(d.label, d.line, d.text) for d in facts.footnote_defs] == [("1", 5, "A note.")]


@pytest.mark.parametrize("destination", [
    "https://x.org/a%20b", "<https://x.org/a b>", "#f%C3%A9", "//host/a%2Fb",
    "mailto:a%40b.org", "HTTP://X%2"])
def test_a_percent_in_a_destination_outside_the_bundle_stays_on_the_fast_path(
        destination: str) -> None:
    """Neither parser decodes a percent escape nor escapes a scheme, "#" or "/": a URL or an
    anchor holding "%" is outside the bundle in both, so the fast path answers it (17 of
    cpp-docs' 183 documents sent to the reference, and 7 of vcpkg-docs' 14, had nothing else
    the fast path declines)."""
    doc = document("d/x.md", f"# T\n\nSee [u]({destination}) and\n[a](a.md).\n".encode())
    facts = markdown_fast.parse_markdown_fast(doc)
    assert facts is not None and facts == parse_markdown_reference(doc)
    assert [(link.raw, link.line) for link in facts.links] == [("a.md", 4)]


@pytest.mark.parametrize(("destination", "raw"), [
    ("<a b.md>", "a b.md"), ("..\\b.md", "..\\b.md"), ("<é ü.md>", "é ü.md"),
    ("a\\_b.md", "a_b.md")])
def test_an_inline_destination_written_without_a_percent_stays_on_the_fast_path(
        destination: str, raw: str) -> None:
    """Every escape in the Rust port's destination was added by it when the inline link is
    written with no "%" (nor "&"): undone, the destination is the reference's, as written
    (cpp-docs writes "[a](..\\b.md)" in places)."""
    doc = document("d/x.md", f"# T\n\nSee [u]({destination}) and\n[a](a.md).\n".encode())
    facts = markdown_fast.parse_markdown_fast(doc)
    assert facts is not None and facts == parse_markdown_reference(doc)
    assert [(link.raw, link.line) for link in facts.links] == [(raw, 3), ("a.md", 4)]


def test_an_inline_link_before_a_parenthesis_stays_on_the_fast_path() -> None:
    """"[f](#f)(x, y)": a link then text, in both parsers; only a reference link before "("
    is read differently ("reference before a parenthesis")."""
    doc = document("d/x.md", b"Call [f](#f)(*x*, y) or [g](g.md)(z).\n")
    facts = markdown_fast.parse_markdown_fast(doc)
    assert facts is not None and facts == parse_markdown_reference(doc)
    assert [link.raw for link in facts.links] == ["g.md"]


@pytest.mark.parametrize(("text", "safe"), [
    ("`WS_CHILD | WS_VISIBLE`, see [w](w.md).\n", True),  # no table: "|" is text
    ("| a | b |\n|---|---|\n| `x | [y](y.md)` |\n", False),  # a cell's unclosed run
    ("> | a | b |\n> |---|---|\n> | `x | [y](y.md)` |\n", False),  # in a quote
    ("- | a | b |\n  |---|---|\n  | `x | [y](y.md)` |\n", False),  # in a list item
    ("[`x\n", False),
])
def test_a_pipe_cuts_a_line_only_in_a_block_that_may_be_a_table(text: str, safe: bool) -> None:
    assert markdown_fast._may_panic(text) is not safe
    doc = document("d/x.md", text.encode())
    assert parse_markdown(doc) == parse_markdown_reference(doc)


def test_corpus_sample_is_deterministic_and_bounded(tmp_path: Path) -> None:
    for n in range(1000):
        (tmp_path / f"{n:04}.md").write_text("x\n")
    first = corpus_sample(tmp_path)
    assert first == corpus_sample(tmp_path)
    assert len(first) == CORPUS_SAMPLE
    assert first[0].name == "0000.md" and len(set(itertools.chain(first))) == CORPUS_SAMPLE
