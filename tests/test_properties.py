"""Property tests: the reference grammar, link containment, slugs, and the frontmatter parser.

Profiles: ``HYPOTHESIS_PROFILE=ci`` (50 examples, no deadline) or ``dev`` (200 examples, the
default). The heavier properties are marked ``slow``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from bundle_mcp.loader.document import parse_document
from bundle_mcp.loader.frontmatter import FrontmatterError, split_frontmatter
from bundle_mcp.loader.strict_yaml import load_yaml
from bundle_mcp.okf.ids import concept_id_problem
from bundle_mcp.okf.markdown import SlugCounter, github_slug, resolve_link
from bundle_mcp.okf.relations import (
    BadReference,
    escape_id,
    format_reference,
    parse_reference,
)

# Characters that are never part of an ID or fragment here: controls and surrogates (categories)
# plus the ID separators and forbidden characters.
_NO_CONTROLS = ("Cc", "Cs")


# --- (a) relation reference grammar ---------------------------------------------------------

_segment = st.text(
    alphabet=st.characters(blacklist_categories=_NO_CONTROLS, blacklist_characters="/\\:"),
    min_size=1,
    max_size=8,
).filter(lambda s: not s.startswith("."))


def _canonical(segments: list[str]) -> bool:
    value = "/".join(segments)
    return (
        value == value.strip()
        and segments[-1] not in ("index", "log")
        and not value.endswith(".md")
    )


concept_ids = (
    st.lists(_segment | st.sampled_from(["a", "tables", "hash#name", "a b", "ünï", "x#"]),
             min_size=1, max_size=4)
    .filter(_canonical)
    .map("/".join)
)
fragments = st.text(
    alphabet=st.characters(blacklist_categories=_NO_CONTROLS, blacklist_characters="#"),
    min_size=1,
    max_size=12,
).filter(lambda f: f == f.strip())


@given(concept_ids, st.none() | fragments)
@example("hash#name", "frag")
@example("x#", None)
@example("a#b", "c\\d")
def test_reference_round_trip(concept_id: str, fragment: str | None) -> None:
    assert concept_id_problem(concept_id) is None  # the strategy only makes canonical IDs
    ref = format_reference(concept_id, fragment)
    parsed = parse_reference(ref)
    assert (parsed.concept_id, parsed.fragment) == (concept_id, fragment)
    assert escape_id(concept_id).replace("\\#", "#") == concept_id


@given(st.text(max_size=40))
@example("a\\#b#c\\d")
@example("\\")
@example("a#")
def test_parse_reference_is_total_and_format_inverts_it(ref: str) -> None:
    try:
        parsed = parse_reference(ref)
    except BadReference:
        return
    assert format_reference(parsed.concept_id, parsed.fragment) == ref
    assert concept_id_problem(parsed.concept_id) is None


# --- (b) link resolution never leaves the root ------------------------------------------------

_link_segments = st.sampled_from(
    ["..", ".", "", "%2e%2e", "%2E%2e", "%2e.", ".%2E", "%2f", "..%2f..", "%2e%2e%2f", "a",
     "b c", "x.md", "%23", "..md", "...", "%252e%252e"]
)
destinations = st.builds(
    lambda lead, segs, tail: lead + "/".join(segs) + tail,
    st.sampled_from(["", "/", "./", "../"]),
    st.lists(_link_segments, min_size=1, max_size=10),
    st.sampled_from(["", "/", "#frag", "?q=1", "#..", "?../../x"]),
)
source_dirs = st.sampled_from(["", "a", "a/b", "a/b/c", "deep/er/still/deeper"])


def _assert_contained(raw: str, source_dir: str) -> None:
    link = resolve_link(raw, source_dir, 1)
    if link is None or link.target is None:
        if link is not None:
            assert link.concept_id is None
        return
    target = link.target
    assert not target.startswith("/")
    if target:
        assert all(seg not in ("", ".", "..") for seg in target.split("/")), target
    if link.concept_id is not None:
        assert link.concept_id in (target, target.removesuffix(".md"))
        assert not link.is_directory


@given(destinations, source_dirs)
@example("%2e%2e/%2e%2e/%2e%2e/x.md", "a/b")
@example("/..%2f..%2fetc/passwd", "")
def test_link_targets_stay_inside_the_root(raw: str, source_dir: str) -> None:
    _assert_contained(raw, source_dir)


@given(st.text(max_size=60), source_dirs)
def test_link_targets_stay_inside_the_root_for_any_text(raw: str, source_dir: str) -> None:
    _assert_contained(raw, source_dir)


@pytest.mark.slow
@settings(suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(destinations, min_size=1, max_size=5), source_dirs)
def test_links_parsed_from_markdown_stay_inside_the_root(
    raws: list[str], source_dir: str
) -> None:
    body = "".join(f"- [x](<{raw}>)\n" for raw in raws)
    path = f"{source_dir}/doc.md" if source_dir else "doc.md"
    doc = parse_document(path, ("---\ntype: t\n---\n" + body).encode())
    for link in doc.markdown.links:
        assert 4 <= link.line <= doc.line_count
        assert link == resolve_link(link.raw, source_dir, link.line)
        _assert_contained(link.raw, source_dir)


# --- (c) slugs ----------------------------------------------------------------------------------

headings = st.text(max_size=30)
colliding_headings = st.lists(
    st.text(alphabet="aA-1 _!", max_size=6), min_size=1, max_size=25
)


@given(headings)
@example("Straße Café")
@example("İstanbul")
@example("API  --  v2!")
def test_github_slug_is_deterministic_lowercase_and_space_free(text: str) -> None:
    slug = github_slug(text)
    assert slug == github_slug(text)
    assert not any(ch.isspace() for ch in slug)
    assert slug == slug.lower()
    assert github_slug(slug) == slug


@given(colliding_headings)
@example(["a", "a", "a-1"])
@example(["a-1", "a", "a"])
@example(["", "", "-1"])
def test_slug_counter_yields_unique_anchors(texts: list[str]) -> None:
    counter = SlugCounter()
    anchors = [counter.slug(t) for t in texts]
    assert len(set(anchors)) == len(anchors)
    for text, anchor in zip(texts, anchors, strict=True):
        assert anchor.startswith(github_slug(text))
    first = texts[0]
    assert anchors[0] == github_slug(first)


# --- (d) the frontmatter parser never crashes -------------------------------------------------

_yamlish = st.text(
    alphabet=st.sampled_from(list("ab:- []{}&*|>'\"#\n\t,?%@`\\019.~=<\r"))
    | st.characters(blacklist_categories=("Cs",)),
    max_size=200,
)
documents = st.one_of(
    st.text(max_size=300),
    st.builds(lambda a, b, c: a + b + c,
              st.sampled_from(["---\n", "---\r\n", "\ufeff---\n", "---  \n", ""]),
              _yamlish,
              st.sampled_from(["\n---\n", "\r\n---\r\nbody", "", "\n---"])),
)


def _json_native(value: Any) -> None:
    if isinstance(value, dict):
        assert all(isinstance(k, str) for k in value)
        for v in value.values():
            _json_native(v)
    elif isinstance(value, list):
        for v in value:
            _json_native(v)
    else:
        assert value is None or isinstance(value, (str, bool, int, float)), repr(value)


def _known_tag_crash(text: str) -> bool:
    # Explicit tags used to crash load_yaml (see test_bad_explicit_tags_are_invalid_frontmatter);
    # they are now part of the search space.
    return False


@settings(deadline=None)
@given(documents)
@example("---\na: &a [*a]\n---\n")
@example("---\n" + "\n".join(f"k{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]"
                             for i in range(1, 9)).replace("*a0", "x") + "\n---\n")
@example("---\n? [a]\n: b\n---\n")
@example("---\na: 1\na: 2\n---\n")
@example("---\n<<: {a: 1}\nb: 2\n---\n")
def test_frontmatter_parser_raises_only_frontmatter_error(text: str) -> None:
    assume(not _known_tag_crash(text))
    try:
        split = split_frontmatter(text)
    except FrontmatterError as exc:
        assert exc.code == "unterminated_frontmatter" and exc.line == 1
        return
    assert split.body_line >= 1
    candidates = [text] if split.raw is None else [split.raw, text]
    for raw in candidates:
        try:
            value = load_yaml(raw, split.raw_line or 2)
        except FrontmatterError as exc:
            assert exc.code in ("invalid_frontmatter", "invalid_yaml_graph", "resource_limit")
            assert exc.line is None or exc.line >= 1
            continue
        assert isinstance(value, dict)
        _json_native(value)
        json.dumps(value, allow_nan=False)


@pytest.mark.slow
@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=400) | documents.map(lambda t: t.encode("utf-8")))
def test_parse_document_never_raises_and_keeps_lines_in_range(data: bytes) -> None:
    assume(not _known_tag_crash(data.decode("utf-8", "replace")))
    doc = parse_document("dir/doc.md", data)
    if doc.parse_error is not None:
        assert doc.parse_error.line is None or doc.parse_error.line >= 1
        return
    facts = doc.markdown
    previous_end = doc.body_line - 1
    for section in facts.sections:
        assert section.line_start > previous_end
        assert section.line_start <= section.line_end <= max(doc.line_count, section.line_start)
        previous_end = section.line_end
    for link in facts.links:
        assert doc.body_line <= link.line <= max(doc.line_count, doc.body_line)
