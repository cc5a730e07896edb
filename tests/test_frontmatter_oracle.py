"""python-frontmatter as the reference our frontmatter split is checked against.

Why it is not the parser is in docs/decisions/loading.md ("python-frontmatter is the reference").

The loader splits documents itself, because python-frontmatter strips the text (line numbers
drift), drops the metadata of a file that starts with a BOM and reads a leading thematic break as
a delimiter. Where none of those applies, the two must agree: the same metadata (both loaded by
our strict YAML loader, which we hand to python-frontmatter as its handler) and the same body up
to the surrounding white space python-frontmatter strips. Every Markdown file of the example
bundle, the test bundles, the conformance fixtures and the three real corpora is compared, and
each known divergence is pinned by a case of its own, so a change on either side is seen.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import frontmatter
import pytest
from frontmatter.default_handlers import YAMLHandler

from bundle_mcp.loader.frontmatter import FrontmatterError, split_frontmatter
from bundle_mcp.loader.strict_yaml import load_yaml

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
FOLDERS = [
    ROOT / "examples",
    ROOT / "testdata",
    SHARED / "conformance",
    SHARED / "corpora",
]


class StrictHandler(YAMLHandler):  # type: ignore[misc]
    """python-frontmatter's YAML handler with our loader in place of PyYAML's SafeLoader (no
    timestamps, YAML 1.2 booleans, duplicate keys and alias bombs refused)."""

    def load(self, fm: str, **kwargs: object) -> Any:
        return load_yaml(fm, 1)


def theirs(text: str) -> tuple[dict[str, object], str]:
    return frontmatter.parse(text, handler=StrictHandler())


def ours(text: str) -> tuple[dict[str, object] | None, str]:
    split = split_frontmatter(text)
    return (None if split.raw is None else load_yaml(split.raw, split.raw_line)), split.body


def comparable(text: str) -> bool:
    """Texts python-frontmatter reads as the format means them (divergences are tested below)."""
    return not (
        text.startswith("\ufeff")  # BOM: python-frontmatter keeps the block as body
        or "\r" in text  # python-frontmatter's boundary pattern is for \n line ends
        or text[:1].isspace()  # it strips first, so a block after blank lines counts for it
        or (text.startswith("-") and not text.startswith("---\n") and not text.startswith("--- "))
    )


def markdown_texts() -> Iterator[tuple[str, str]]:
    for folder in FOLDERS:
        for path in sorted(folder.rglob("*.md")):
            try:
                text = path.read_bytes().decode("utf-8")
            except (OSError, UnicodeDecodeError):
                continue  # unreadable or not UTF-8: a parse error for the loader
            yield str(path.relative_to(folder.parent)), text


def test_python_frontmatter_agrees_on_every_real_document() -> None:
    if not (SHARED / "corpora").is_dir():
        pytest.skip(f"the shared corpora are not at {SHARED / 'corpora'}")
    compared = with_block = 0
    disagreements = []
    for name, text in markdown_texts():
        if not comparable(text):
            continue
        try:
            our_meta, our_body = ours(text)
        except FrontmatterError:
            continue  # malformed YAML or an unterminated block: rejected by the loader
        try:
            their_meta, their_body = theirs(text)
        except FrontmatterError as exc:
            disagreements.append(f"{name}: python-frontmatter's split fails our loader: {exc}")
            continue
        compared += 1
        with_block += our_meta is not None
        if our_meta is None and text.startswith("---"):
            continue  # a thematic break, not frontmatter: the pinned divergence below
        expected_meta = {} if our_meta is None else our_meta
        if their_meta != expected_meta or their_body != our_body.strip():
            disagreements.append(name)
    assert disagreements == []
    assert compared > 10_000 and with_block > 1_000, (compared, with_block)


@pytest.mark.parametrize(
    ("text", "metadata", "body"),
    [
        ("---\ntype: Note\n---\n\n# Beans\n", {"type": "Note"}, "# Beans"),
        ("---\n---\nbody\n", {}, "body"),
        ("# No block\n\ntext\n", {}, "# No block\n\ntext"),
        ("---\ndate: 2024-01-01\nok: yes\n---\nx\n", {"date": "2024-01-01", "ok": "yes"}, "x"),
    ],
)
def test_both_read_plain_documents_alike(text: str, metadata: dict[str, Any], body: str) -> None:
    assert theirs(text) == (metadata, body)
    our_meta, our_body = ours(text)
    assert (our_meta or {}, our_body.strip()) == (metadata, body)


def test_divergence_a_leading_bom() -> None:
    """OKF tolerates a BOM before the block; python-frontmatter returns the block as body."""
    text = "\ufeff---\ntype: Note\n---\nbody\n"
    assert ours(text) == ({"type": "Note"}, "body\n")
    assert theirs(text) == ({}, text.strip())


def test_divergence_a_leading_thematic_break() -> None:
    """A file that opens with a thematic break and has no YAML mapping: python-frontmatter drops
    the first paragraph; the loader, reading the block as YAML, reports it instead of losing it."""
    text = "---\nSome text\n\n---\nmore\n"
    meta, body = frontmatter.parse(text)  # its own SafeLoader reads "Some text" as a scalar
    assert (meta, body) == ({}, "more")
    with pytest.raises(FrontmatterError) as caught:
        ours(text)
    assert caught.value.code == "invalid_frontmatter"


def test_divergence_stripped_body_moves_line_numbers() -> None:
    """python-frontmatter strips the body, so its line 1 is not the file's line after the block."""
    text = "---\ntype: Note\n---\n\n\n[link](other.md)\n"
    split = split_frontmatter(text)
    assert split.body_line == 4 and split.body.startswith("\n\n[link]")
    assert theirs(text)[1] == "[link](other.md)"


def test_divergence_carriage_returns() -> None:
    """CR-only line ends: the loader finds the block; python-frontmatter's pattern does not."""
    text = "---\rtype: Note\r---\rbody\r"
    assert ours(text) == ({"type": "Note"}, "body\r")
    assert theirs(text) == ({}, text.strip())
