"""The loader: root pinning, capture and caps, parsing, and snapshot reuse.

Committed bundles live in testdata/bundles/loader-*/ (one theme each). Cases that cannot be
committed (symlinks, FIFOs, undecodable names, files of many MiB) are built in tmp_path.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import unicodedata
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from bundle_mcp.cancel import CancelToken
from bundle_mcp.errors import BundleError
from bundle_mcp.loader import load_bundle
from bundle_mcp.loader.capture import (
    MAX_DEPTH,
    MAX_FILE_BYTES,
    MAX_FILES,
    MAX_PATH_BYTES,
    MAX_TOTAL_BYTES,
    Capture,
    capture,
)
from bundle_mcp.loader.document import parse_document
from bundle_mcp.loader.frontmatter import MAX_FRONTMATTER_BYTES
from bundle_mcp.loader.ignore import IgnoreRules
from bundle_mcp.model import INDEX, LOG, Link, Relation, Section, Snapshot
from bundle_mcp.okf.properties import status_state, trust
from bundle_mcp.storage.handles import pin_root

TESTDATA = Path(__file__).resolve().parent.parent / "testdata" / "bundles"
FM = "---\ntype: note\n---\n"


def load(name: str) -> Snapshot:
    snapshot, _ = load_bundle(str(TESTDATA / name))
    return snapshot


def make_bundle(root: Path, files: dict[str, str | bytes]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content.encode("utf-8") if isinstance(content, str) else content)
    return root.resolve()


def capture_of(root: Path, **caps: int) -> Capture:
    fd = pin_root(str(root))
    try:
        return capture(fd, CancelToken(), **caps)
    finally:
        os.close(fd)


def touch_empty(dir_fd: int, name: str) -> None:
    os.close(os.open(name, os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=dir_fd))


def assert_bundle_path_field(error: BundleError) -> None:
    """One ``invalid_input`` diagnostic naming the ``bundle_path`` argument (as a JSON path)."""
    assert [(d.code, (d.field or "").removeprefix("$.")) for d in error.diagnostics] == [
        ("invalid_input", "bundle_path")]


def expect_error(code: str, fn, *args, **kwargs) -> BundleError:
    with pytest.raises(BundleError) as info:
        fn(*args, **kwargs)
    assert info.value.code == code, info.value
    return info.value


# --- revision and file records -------------------------------------------------------------


def test_revision_is_independent_of_the_bundle_location(tmp_path: Path) -> None:
    original = load("loader-relations")
    copy = tmp_path / "elsewhere" / "deeper" / "bundle"
    shutil.copytree(TESTDATA / "loader-relations", copy)
    moved, _ = load_bundle(str(copy.resolve()))
    assert moved.revision == original.revision
    assert moved.records == original.records


def test_revision_changes_when_one_byte_changes(tmp_path: Path) -> None:
    root = tmp_path / "bundle"
    shutil.copytree(TESTDATA / "loader-relations", root)
    before, _ = load_bundle(str(root.resolve()))
    target = root / "target.md"
    data = bytearray(target.read_bytes())
    data[-2] = ord("X") if data[-2] != ord("X") else ord("Y")  # same size, one byte differs
    target.write_bytes(bytes(data))
    after, _ = load_bundle(str(root.resolve()))
    assert after.revision != before.revision
    assert len(after.revision) == 64 and int(after.revision, 16) >= 0


def test_revision_is_sha256_of_the_canonical_sorted_records() -> None:
    snapshot = load("loader-special-names")
    records = []
    for path in sorted(snapshot.documents):
        data = (TESTDATA / "loader-special-names" / path).read_bytes()
        records.append({"path": path, "sha256": hashlib.sha256(data).hexdigest(),
                        "size": len(data)})
    payload = json.dumps(records, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert snapshot.revision == hashlib.sha256(payload.encode("utf-8")).hexdigest()


@pytest.mark.parametrize("bundle", ["loader-relations", "loader-reserved", "loader-unicode",
                                    "loader-deep-nesting", "loader-okfignore"])
def test_file_records_documents_and_concepts_are_sorted(bundle: str) -> None:
    snapshot = load(bundle)
    paths = [r.path for r in snapshot.records]
    assert paths == sorted(paths)
    assert list(snapshot.documents) == sorted(snapshot.documents)
    assert list(snapshot.concepts) == sorted(snapshot.concepts)


# --- concept IDs and reserved files ----------------------------------------------------------


def test_concept_ids_are_paths_without_md() -> None:
    snapshot = load("loader-deep-nesting")
    assert list(snapshot.concepts) == ["a/b/c/d/e/f/deep", "a/b/mid", "top"]
    assert snapshot.concepts["a/b/c/d/e/f/deep"].path == "a/b/c/d/e/f/deep.md"


def test_special_characters_are_legal_in_ids() -> None:
    snapshot = load("loader-special-names")
    assert {"hash#name", "a b", "links"} == set(snapshot.concepts)


def test_nfc_and_nfd_names_are_two_concepts_and_never_normalised() -> None:
    if len(os.listdir(TESTDATA / "loader-unicode")) < 3:
        pytest.skip("this filesystem normalises file names (NFC and NFD collapse)")
    snapshot = load("loader-unicode")
    nfc = unicodedata.normalize("NFC", "café")
    nfd = unicodedata.normalize("NFD", "café")
    assert nfc != nfd
    assert {nfc, nfd, "日本語"} == set(snapshot.concepts)
    assert snapshot.concepts[nfc].fm["title"] == "Caf\u00e9 (NFC) \u2615"
    assert snapshot.concepts[nfd].fm["title"] == "Cafe\u0301 (NFD)"  # kept as written
    assert snapshot.concepts["日本語"].fm["description"] == "Ünïcödé — ελληνικά"


def test_reserved_files_are_documents_but_not_concepts() -> None:
    snapshot = load("loader-reserved")
    assert set(snapshot.concepts) == {"thing", "log/entry", "sub/inner"}
    kinds = {p: (d.kind, d.concept_id) for p, d in snapshot.documents.items()}
    assert kinds["index.md"] == (INDEX, None)
    assert kinds["sub/index.md"] == (INDEX, None)
    assert kinds["log.md"] == (LOG, None)
    assert kinds["log/log.md"] == (LOG, None)
    assert kinds["log/entry.md"] == ("concept", "log/entry")  # a folder called log/ is fine
    assert snapshot.root_index is snapshot.documents["index.md"]
    assert dict(snapshot.root_index.fm) == {"okf_version": "0.2"}


# --- parse errors ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("bundle", "path", "code", "line"),
    [
        ("loader-duplicate-keys", "dup.md", "invalid_frontmatter", 4),
        ("loader-duplicate-keys", "dup-nested.md", "invalid_frontmatter", 5),
        ("loader-invalid-utf8", "bad.md", "invalid_encoding", 5),
        ("loader-alias-bomb", "bomb.md", "invalid_yaml_graph", 8),
        ("loader-recursive-alias", "loop.md", "invalid_yaml_graph", 3),
    ],
)
def test_committed_broken_files_carry_code_and_line(
    bundle: str, path: str, code: str, line: int
) -> None:
    snapshot = load(bundle)
    doc = snapshot.documents[path]
    assert doc.parse_error is not None
    assert (doc.parse_error.code, doc.parse_error.line) == (code, line)
    assert doc.parse_error.severity == "ERROR" and doc.parse_error.file == path
    assert doc.concept_id not in snapshot.concepts
    assert doc in snapshot.broken
    assert doc.frontmatter is None and doc.relations == ()
    assert doc.markdown.links == () and doc.markdown.sections == ()
    assert snapshot.concepts  # the healthy neighbour still loads


@pytest.mark.parametrize(
    ("text", "code", "line"),
    [
        ("---\ntype: x\nbody\n", "unterminated_frontmatter", 1),
        ("---\n", "unterminated_frontmatter", 1),
        ("---\ntype: x\nbad: [unclosed\n---\nbody\n", "invalid_frontmatter", 4),
        ("---\ntype: x\n\tbad: 1\n---\n", "invalid_frontmatter", 3),
        ("---\n- a\n- b\n---\n", "invalid_frontmatter", 2),
        ("---\njust text\n---\n", "invalid_frontmatter", 2),
        ("---\n? [a]\n: b\n---\n", "invalid_frontmatter", 2),
        ("---\r\ntype: a\r\ntype: b\r\n---\r\n", "invalid_frontmatter", 3),
        ("\ufeff---\ntype: a\ntype: b\n---\n", "invalid_frontmatter", 3),
        ("---\rtype: a\rtype: b\r---\r", "invalid_frontmatter", 3),
        ("---\na: " + "[" * 70 + "]" * 70 + "\n---\n", "invalid_yaml_graph", 2),
        ("---\na: &a x\nb: [" + ", ".join(["*a"] * 1001) + "]\n---\n", "invalid_yaml_graph", 2),
    ],
)
def test_parse_errors_carry_code_and_1_based_line(text: str, code: str, line: int) -> None:
    doc = parse_document("x.md", text.encode("utf-8"))
    assert doc.parse_error is not None
    assert (doc.parse_error.code, doc.parse_error.line) == (code, line)


def test_invalid_utf8_line_is_counted_in_bytes_before_the_bad_sequence() -> None:
    doc = parse_document("x.md", b"a\nb\r\nc\xc3(\n")
    assert doc.parse_error is not None
    assert (doc.parse_error.code, doc.parse_error.line) == ("invalid_encoding", 3)


def test_frontmatter_over_1_mib_is_a_resource_limit_parse_error() -> None:
    raw = "type: x\nbig: " + "a" * MAX_FRONTMATTER_BYTES + "\n"
    doc = parse_document("big.md", f"---\n{raw}---\nbody\n".encode())
    assert doc.parse_error is not None
    assert (doc.parse_error.code, doc.parse_error.line) == ("resource_limit", 2)


def test_frontmatter_of_exactly_1_mib_loads() -> None:
    head = "type: x\nbig: "
    raw = head + "a" * (MAX_FRONTMATTER_BYTES - len(head) - 1) + "\n"
    assert len(raw.encode()) == MAX_FRONTMATTER_BYTES
    doc = parse_document("big.md", f"---\n{raw}---\nbody\n".encode())
    assert doc.parse_error is None
    assert doc.fm["type"] == "x"


def test_not_on_line_1_means_no_frontmatter() -> None:
    snapshot = load("loader-not-line-1")
    for path in ("late.md", "indented.md"):
        doc = snapshot.documents[path]
        assert doc.parse_error is None
        assert doc.frontmatter is None and doc.frontmatter_raw is None
        assert doc.body_line == 1 and doc.body == doc.text
    assert snapshot.documents["ok.md"].fm["type"] == "note"


def test_empty_documents() -> None:
    snapshot = load("loader-empty-body")
    empty_body = snapshot.documents["empty-body.md"]
    assert empty_body.body == "" and empty_body.markdown.sections == ()
    assert empty_body.fm["title"] == "Empty body"
    no_newline = snapshot.documents["no-final-newline.md"]
    assert (no_newline.frontmatter_raw, no_newline.body, no_newline.line_count) == (
        "type: note\n", "", 3)
    empty_file = snapshot.documents["empty-file.md"]
    assert empty_file.parse_error is None and empty_file.frontmatter is None
    assert (empty_file.line_count, empty_file.markdown.sections) == (0, ())
    empty_fm = snapshot.documents["empty-frontmatter.md"]
    assert empty_fm.frontmatter_raw == "" and dict(empty_fm.fm) == {}
    assert empty_fm.frontmatter is not None


# --- raw frontmatter, line endings and body_line -------------------------------------------


@pytest.mark.parametrize(
    ("path", "raw"),
    [
        ("crlf.md", "type: note\r\ntitle: CRLF\r\n"),
        ("mixed.md", "type: note\ntitle: Mixed\r\n"),
        ("lone-cr.md", "type: note\rtitle: Lone CR\r"),
        ("bom.md", "type: note\ntitle: BOM\n"),
        ("lf.md", "type: note\ntitle: LF\n"),
    ],
)
def test_raw_frontmatter_is_kept_byte_for_byte(path: str, raw: str) -> None:
    snapshot = load("loader-line-endings")
    doc = snapshot.documents[path]
    data = (TESTDATA / "loader-line-endings" / path).read_bytes()
    assert doc.frontmatter_raw == raw
    assert raw.encode() in data
    assert doc.text.encode("utf-8") == data  # the whole file, BOM included
    assert doc.body_line == 5
    assert doc.body.startswith("# One")
    assert doc.fm["type"] == "note"


def test_line_endings_count_crlf_as_one_line() -> None:
    snapshot = load("loader-line-endings")
    counts = {p: d.line_count for p, d in snapshot.documents.items()}
    assert counts == {"bom.md": 7, "crlf.md": 9, "lf.md": 7, "lone-cr.md": 9, "mixed.md": 9}
    crlf = snapshot.documents["crlf.md"]
    assert crlf.lines[4] == "# One" and crlf.lines[7] == "## Two"
    assert [(s.heading, s.line_start, s.line_end) for s in crlf.markdown.sections] == [
        ("One", 5, 7), ("Two", 8, 9)]
    assert [(link.raw, link.line) for link in crlf.markdown.links] == [("lf.md", 6)]
    lone = snapshot.documents["lone-cr.md"]
    assert [(s.heading, s.line_start, s.line_end) for s in lone.markdown.sections] == [
        ("One", 5, 7), ("Two", 8, 9)]
    assert [(link.raw, link.line) for link in lone.markdown.links] == [("lf.md", 9)]
    mixed = snapshot.documents["mixed.md"]
    assert [(s.line_start, s.line_end) for s in mixed.markdown.sections] == [(5, 7), (8, 9)]
    assert [link.line for link in mixed.markdown.links] == [9]
    bom = snapshot.documents["bom.md"]
    assert [link.line for link in bom.markdown.links] == [7]


# --- sections -----------------------------------------------------------------------------


def test_sections_preamble_setext_duplicates_and_fenced_headings() -> None:
    doc = load("loader-headings-in-fences").documents["fences.md"]
    assert doc.markdown.sections == (
        Section(0, None, 0, None, 5, 6, ()),
        Section(1, "Real One", 1, "real-one", 7, 18, ("Real One",)),
        Section(2, "API", 1, "api", 19, 23, ("API",)),
        Section(3, "API", 2, "api-1", 24, 25, ("API", "API")),
        Section(4, "API", 2, "api-2", 26, 27, ("API", "API")),
        Section(5, "Setext two", 2, "setext-two", 28, 30, ("API", "Setext two")),
        Section(6, "Deep", 3, "deep", 31, 31, ("API", "Setext two", "Deep")),
    )
    headings = {s.heading for s in doc.markdown.sections}
    assert not headings & {"Fake", "Fake too", "Indented fake"}
    assert set(doc.markdown.anchors) == {"real-one", "api", "api-1", "api-2", "setext-two", "deep"}


def test_sections_tile_the_body_without_overlap() -> None:
    for bundle in ("loader-headings-in-fences", "loader-line-endings", "loader-unicode"):
        for doc in load(bundle).documents.values():
            previous_end = doc.body_line - 1
            for section in doc.markdown.sections:
                assert section.line_start > previous_end
                assert section.line_start <= section.line_end <= doc.line_count
                previous_end = section.line_end


def test_blank_preamble_is_not_a_section_and_unicode_anchors_are_kept() -> None:
    doc = load("loader-unicode").documents["日本語.md"]
    assert [(s.heading, s.anchor, s.line_start) for s in doc.markdown.sections] == [
        ("Straße Café", "straße-café", 7), ("Привет мир!", "привет-мир", 11)]


def test_heading_text_drops_markup_but_keeps_link_text() -> None:
    doc = parse_document("h.md", (FM + "# See [*Foo*](foo.md) `code` ###\n").encode())
    (section,) = doc.markdown.sections
    assert (section.heading, section.anchor, section.line_start) == (
        "See Foo code", "see-foo-code", 4)


# --- links ---------------------------------------------------------------------------------


def test_code_owned_pseudo_links_are_not_links() -> None:
    doc = load("loader-code-links").documents["code.md"]
    assert [(link.raw, link.line, link.concept_id) for link in doc.markdown.links] == [
        ("target.md", 19, "target")]


def test_special_names_percent_decoding_fragments_queries_and_references() -> None:
    doc = load("loader-special-names").documents["links.md"]
    assert list(doc.markdown.links) == [
        Link("hash%23name.md", 6, "hash#name.md", "hash#name", None, False),
        Link("a%20b.md", 7, "a b.md", "a b", None, False),
        Link("a b.md", 8, "a b.md", "a b", None, False),
        Link("a%20b.md#part-one", 9, "a b.md", "a b", "part-one", False),
        Link("a%20b.md?x=1#part-one", 10, "a b.md", "a b", "part-one", False),
        # an unencoded '#' starts the fragment, as in any URL
        Link("hash#name.md", 11, "hash", "hash", "name.md", False),
        # reference-style: the line of the use, the destination of the definition
        Link("a%20b.md", 12, "a b.md", "a b", None, False),
        Link("./", 13, "", None, None, True),
    ]


def test_escaping_links_are_kept_with_target_none() -> None:
    doc = load("loader-escapes").documents["sub/escape.md"]
    assert [(link.raw, link.line, link.target, link.concept_id)
            for link in doc.markdown.links] == [
        ("../../outside.md", 6, None, None),
        ("/../x.md", 7, None, None),
        ("../ok.md", 8, "ok.md", "ok"),
        ("/./ok.md", 9, "ok.md", "ok"),
        ("%2e%2e/%2e%2e/x.md", 10, None, None),
    ]


def test_root_absolute_links_from_deep_folders() -> None:
    doc = load("loader-deep-nesting").documents["a/b/c/d/e/f/deep.md"]
    assert [(link.target, link.concept_id) for link in doc.markdown.links] == [
        ("top.md", "top"), ("a/b/mid.md", "a/b/mid"), ("a/b/mid.md", "a/b/mid")]
    snapshot = load("loader-deep-nesting")
    assert {(e.source_id, e.target_id) for e in snapshot.edges} == {
        ("a/b/c/d/e/f/deep", "top"), ("a/b/c/d/e/f/deep", "a/b/mid")}


@pytest.mark.parametrize(
    ("raw", "target", "concept_id", "fragment", "is_directory"),
    [
        ("sub/", "dir/sub", None, None, True),
        ("../", "", None, None, True),
        ("/", "", None, None, True),
        ("other", "dir/other", "dir/other", None, False),
        ("other.md#Frag%20X", "dir/other.md", "dir/other", "Frag X", False),
        ("./x/../y.md", "dir/y.md", "dir/y", None, False),
        ("image.png", "dir/image.png", "dir/image.png", None, False),
    ],
)
def test_link_resolution_table(
    raw: str, target: str, concept_id: str | None, fragment: str | None, is_directory: bool
) -> None:
    doc = parse_document("dir/src.md", (FM + f"[x]({raw})\n").encode())
    assert list(doc.markdown.links) == [
        Link(raw, 4, target, concept_id, fragment, is_directory)]


@pytest.mark.parametrize(
    "raw", ["", "#top", "https://example.com/a.md", "mailto:a@b", "//host/x.md", "?q=1",
            "C:/x.md"],
)
def test_non_bundle_destinations_are_not_links(raw: str) -> None:
    doc = parse_document("src.md", (FM + f"[x](<{raw}>)\n").encode())
    assert doc.markdown.links == ()


def test_links_in_tables_quotes_lists_and_footnotes_have_their_physical_lines() -> None:
    text = (FM + "| a | b |\n|---|---|\n| x | [t1](t1.md) |\n\n> quote\nlazy [q](q.md)\n\n"
            "Text[^n].\n\n[^n]: Note [fn](fn.md)\n\n- item\n  [li](li.md)\n")
    doc = parse_document("src.md", text.encode())
    assert sorted((link.line, link.raw) for link in doc.markdown.links) == [
        (6, "t1.md"), (9, "q.md"), (13, "fn.md"), (16, "li.md")]
    assert [(r.label, r.line) for r in doc.markdown.footnote_refs] == [("n", 11)]


# --- relations -----------------------------------------------------------------------------


def test_relations_top_level_nested_escaped_and_fragments() -> None:
    doc = load("loader-relations").documents["source.md"]
    assert doc.relations == (
        Relation("source", "bad_refs", "missing", "missing", None),
        Relation("source", "depends_on", "hash\\#name", "hash#name", None),
        Relation("source", "depends_on", "hash\\#name#frag", "hash#name", "frag"),
        Relation("source", "depends_on", "sub/other", "sub/other", None),
        Relation("source", "depends_on", "target", "target", None),
        Relation("source", "depends_on", "target#intro", "target", "intro"),
        Relation("source#details", "cites", "target#intro", "target", "intro"),
        Relation("source#intro", "explains", "sub/other", "sub/other", None),
    )
    problems = sorted((d.code, d.severity, d.field) for d in doc.relation_diagnostics)
    assert problems == sorted([
        ("invalid_relation", "WARN", "relations.title"),
        ("invalid_relation", "WARN", "relations.9bad"),
        ("invalid_relation", "WARN", "relations.bad_refs[0].target"),
        ("invalid_relation", "WARN", "relations.bad_refs[1].target"),
        ("invalid_relation", "WARN", "relations.bad_refs[2].target"),
        ("invalid_relation", "WARN", "relations.bad_refs[3].target"),
        ("invalid_relation", "WARN", "sections[2].relations"),
    ])


def test_relation_edges_resolve_only_to_existing_concepts() -> None:
    snapshot = load("loader-relations")
    relation_edges = [(e.source_ref, e.relation_type, e.target_ref)
                      for e in snapshot.edges if e.kind == "relation"]
    assert ("source", "bad_refs", "missing") not in relation_edges
    assert ("source", "depends_on", "hash\\#name") in relation_edges
    assert ("source#intro", "explains", "sub/other") in relation_edges
    assert len(relation_edges) == len(set(relation_edges))


# --- YAML scalars, status, trust, sources ---------------------------------------------------


def test_dates_stay_strings() -> None:
    snapshot = load("loader-temporal")
    dates = snapshot.concepts["dates"].fm
    assert dates["stale_after"] == "2026-09-01"
    assert dict(dates["usage_window"]) == {"from": "2026-01-01", "to": "2026-06-30"}
    assert dates["sources"][0]["last_modified"] == "2026-02-03"
    instants = snapshot.concepts["instants"].fm
    assert instants["stale_after"] == "2026-09-01T00:00:00Z"
    assert instants["sources"][0]["last_modified"] == "2026-02-03T10:00:00+02:00"


def test_yaml_1_2_booleans() -> None:
    fm = load("loader-temporal").concepts["scalars"].fm
    assert (fm["on_flag"], fm["yes_flag"], fm["no_flag"], fm["off_flag"], fm["y"]) == (
        "on", "yes", "no", "off", "y")
    assert fm["true_flag"] is True and fm["false_flag"] is False
    assert fm["null_value"] is None


def test_status_states() -> None:
    concepts = load("loader-status").concepts
    states = {cid: (s["present"], s["valid"], s["raw"], s["effective"])
              for cid, s in ((cid, status_state(d.fm)) for cid, d in concepts.items())}
    assert states == {
        "absent": (False, True, None, "stable"),
        "draft": (True, True, "draft", "draft"),
        "stable": (True, True, "stable", "stable"),
        "deprecated": (True, True, "deprecated", "deprecated"),
        "retired": (True, False, "retired", None),
        "numeric": (True, False, "3", None),
        "upper": (True, False, "Stable", None),
    }


def test_trust_tiers() -> None:
    concepts = load("loader-trust").concepts
    assert {cid: trust(d.fm) for cid, d in concepts.items()} == {
        "none": "unverified",
        "bare-human": "human-reviewed",
        "list-machine": "machine-confirmed",
        "list-mixed": "human-reviewed",
    }


def test_sources_and_footnotes_are_parsed() -> None:
    snapshot = load("loader-sources")
    footnote = snapshot.concepts["footnote"]
    assert [(r.label, r.line) for r in footnote.markdown.footnote_refs] == [("s1", 7), ("s2", 7)]
    assert [(d.label, d.line) for d in footnote.markdown.footnote_defs] == [("s1", 9), ("s2", 10)]
    assert "resource" not in snapshot.concepts["missing-resource"].fm["sources"][0]


# --- .okfignore and dot entries -------------------------------------------------------------


def test_okfignore_semantics() -> None:
    snapshot = load("loader-okfignore")
    assert list(snapshot.documents) == ["drafts.md", "keep.tmp.md", "real.md", "sub/keep.tmp.md"]
    assert snapshot.directories == {"", "sub"}  # drafts/ and sub/drafts/ are never entered
    assert snapshot.skipped == ()


@pytest.mark.parametrize(
    ("rules", "path", "is_dir", "ignored"),
    [
        ("drafts/", "drafts", True, True),
        ("drafts/", "drafts", False, False),
        ("drafts/", "a/drafts", True, True),
        ("/top.md", "top.md", False, True),
        ("/top.md", "sub/top.md", False, False),
        ("docs/*.md", "docs/a.md", False, True),
        ("docs/*.md", "docs/x/a.md", False, False),
        ("docs/**/a.md", "docs/x/y/a.md", False, True),
        ("docs/**/a.md", "docs/a.md", False, True),
        ("a?.md", "ab.md", False, True),
        ("a?.md", "a/.md", False, False),
        ("[!x]y.md", "zy.md", False, True),
        ("[!x]y.md", "xy.md", False, False),
        ("# comment\n\n*.md\n!keep.md", "keep.md", False, False),
        ("*.md\n!keep.md\nkeep.md", "keep.md", False, True),
        ("\\#hash.md", "#hash.md", False, True),
        ("\\!bang.md", "!bang.md", False, True),
        ("trailing.md   ", "trailing.md", False, True),
        ("abc/**", "abc/x/y.md", False, True),
        ("abc/**", "abc", True, False),
    ],
)
def test_ignore_rules(rules: str, path: str, is_dir: bool, ignored: bool) -> None:
    assert IgnoreRules.parse(rules).ignored(path, is_dir=is_dir) is ignored


def test_dot_entries_are_skipped_silently() -> None:
    snapshot = load("loader-dot-entries")
    assert list(snapshot.documents) == ["sub/visible.md", "visible.md"]
    assert snapshot.directories == {"", "sub"}
    assert snapshot.skipped == ()


def test_non_md_files_are_assets(tmp_path: Path) -> None:
    root = make_bundle(tmp_path / "b", {"a.md": FM, "img/logo.png": b"\x89PNG", "x.MD": FM})
    snapshot, _ = load_bundle(str(root))
    assert list(snapshot.documents) == ["a.md"]
    assert snapshot.assets == {"img/logo.png", "x.MD"}
    assert snapshot.directories == {"", "img"}


# --- root pinning --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "spell",
    [
        lambda b: "testdata/bundles/loader-status",
        lambda b: f"{b.parent}/./{b.name}",
        lambda b: f"{b}/",
        lambda b: "/" + str(b),
        lambda b: f"{b}/sub/..",
        lambda b: f"{b.parent}//{b.name}",
        lambda b: "",
        lambda b: f" {b}",
        lambda b: f"{b}\x00",
    ],
    ids=["relative", "dot", "trailing-slash", "double-leading-slash", "dotdot", "double-slash",
         "empty", "whitespace", "nul"],
)
def test_unclean_bundle_paths_are_invalid_requests(tmp_path: Path, spell) -> None:
    root = make_bundle(tmp_path / "bundle", {"a.md": FM, "sub/b.md": FM})
    error = expect_error("invalid_request", load_bundle, spell(root))
    assert_bundle_path_field(error)
    assert str(tmp_path) not in error.envelope()["message"]


def test_bundle_path_with_a_symlink_component_is_rejected(tmp_path: Path) -> None:
    root = make_bundle(tmp_path / "real" / "bundle", {"a.md": FM})
    os.symlink(tmp_path / "real", tmp_path / "alias")
    os.symlink(root, tmp_path / "bundle-link")
    for path in (tmp_path / "alias" / "bundle", tmp_path / "bundle-link"):
        error = expect_error("invalid_request", load_bundle, str(path))
        assert_bundle_path_field(error)
    load_bundle(str(root))  # the real path itself is fine


def test_bundle_path_that_is_a_file_or_missing_is_rejected(tmp_path: Path) -> None:
    root = make_bundle(tmp_path / "bundle", {"a.md": FM})
    for path in (root / "a.md", root / "missing", root / "a.md" / "below"):
        error = expect_error("invalid_request", load_bundle, str(path))
        assert_bundle_path_field(error)


def test_symlinks_inside_the_tree_are_skipped_never_followed(tmp_path: Path) -> None:
    outside = make_bundle(tmp_path / "outside", {"secret.md": FM + "SECRET\n"})
    root = make_bundle(tmp_path / "bundle", {"real.md": FM + "real\n", "dir/inner.md": FM})
    os.symlink("real.md", root / "to-file.md")
    os.symlink(outside / "secret.md", root / "to-outside.md")
    os.symlink("dir", root / "to-dir")
    os.symlink(outside, root / "to-outside-dir")
    os.symlink("missing.md", root / "dangling.md")
    os.symlink("../real.md", root / "dir" / "nested-link.md")
    snapshot, _ = load_bundle(str(root))
    assert list(snapshot.documents) == ["dir/inner.md", "real.md"]
    assert snapshot.directories == {"", "dir"}
    assert snapshot.assets == frozenset()
    assert all("SECRET" not in d.text for d in snapshot.documents.values())
    assert sorted((d.file, d.code, d.severity) for d in snapshot.skipped) == [
        ("dangling.md", "symlink_skipped", "WARN"),
        ("dir/nested-link.md", "symlink_skipped", "WARN"),
        ("to-dir", "symlink_skipped", "WARN"),
        ("to-file.md", "symlink_skipped", "WARN"),
        ("to-outside-dir", "symlink_skipped", "WARN"),
        ("to-outside.md", "symlink_skipped", "WARN"),
    ]


def test_fifo_is_skipped_without_blocking(tmp_path: Path) -> None:
    root = make_bundle(tmp_path / "bundle", {"a.md": FM})
    os.mkfifo(root / "pipe.md")
    snapshot, _ = load_bundle(str(root))  # never opened, so never blocks
    assert list(snapshot.documents) == ["a.md"]
    assert [(d.file, d.code) for d in snapshot.skipped] == [("pipe.md", "special_file_skipped")]


def test_undecodable_file_name_is_skipped_and_reported(tmp_path: Path) -> None:
    root = make_bundle(tmp_path / "bundle", {"a.md": FM})
    try:
        fd = os.open(os.fsencode(root) + b"/bad\xff.md", os.O_CREAT | os.O_WRONLY, 0o644)
    except OSError:
        pytest.skip("this filesystem refuses non-UTF-8 file names")
    os.close(fd)
    snapshot, _ = load_bundle(str(root))
    assert list(snapshot.documents) == ["a.md"]
    assert [d.code for d in snapshot.skipped] == ["invalid_path_encoding"]
    json.dumps([d.file for d in snapshot.skipped])  # reported name is valid text


# --- caps ------------------------------------------------------------------------------------


def test_cap_constants_match_the_design() -> None:
    assert (MAX_FILES, MAX_TOTAL_BYTES, MAX_FILE_BYTES, MAX_DEPTH, MAX_PATH_BYTES) == (
        10_000, 64 * 1024 * 1024, 16 * 1024 * 1024, 64, 4096)
    assert MAX_FRONTMATTER_BYTES == 1024 * 1024


def test_more_than_10000_markdown_files_is_a_resource_limit(tmp_path: Path) -> None:
    root = tmp_path / "many"
    root.mkdir()
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for i in range(MAX_FILES + 1):
            touch_empty(fd, f"c{i:05d}.md")
    finally:
        os.close(fd)
    error = expect_error("resource_limit", load_bundle, str(root.resolve()))
    assert [d.code for d in error.diagnostics] == ["recovery_step"]
    os.unlink(root / "c00000.md")
    snapshot, _ = load_bundle(str(root.resolve()))  # exactly at the cap is fine
    assert len(snapshot.documents) == MAX_FILES


def test_file_count_cap_counts_markdown_only(tmp_path: Path) -> None:
    root = make_bundle(tmp_path / "b", {"a.md": FM, "b.md": FM, "c.md": FM,
                                        **{f"asset{i}.txt": "x" for i in range(5)}})
    assert len(capture_of(root, max_files=3).files) == 3
    expect_error("resource_limit", capture_of, root, max_files=2)


def test_per_file_cap_via_override(tmp_path: Path) -> None:
    root = make_bundle(tmp_path / "b", {"a.md": b"x" * 100})
    assert capture_of(root, max_file_bytes=100).files[0].data == b"x" * 100
    (root / "a.md").write_bytes(b"x" * 101)
    expect_error("resource_limit", capture_of, root, max_file_bytes=100)


def test_real_16_mib_per_file_cap(tmp_path: Path) -> None:
    root = make_bundle(tmp_path / "b", {})
    with open(root / "exact.md", "wb") as f:
        f.truncate(MAX_FILE_BYTES)  # sparse zeros
    (captured,) = capture_of(root).files
    assert captured.data is not None and len(captured.data) == MAX_FILE_BYTES
    with open(root / "over.md", "wb") as f:
        f.truncate(MAX_FILE_BYTES + 1)
    error = expect_error("resource_limit", load_bundle, str(root))
    assert "over.md" in error.message


def test_aggregate_cap_via_override(tmp_path: Path) -> None:
    root = make_bundle(tmp_path / "b", {f"{n}.md": b"y" * 40 for n in "abc"})
    assert len(capture_of(root, max_total_bytes=120).files) == 3
    expect_error("resource_limit", capture_of, root, max_total_bytes=119)


def test_real_64_mib_aggregate_cap(tmp_path: Path) -> None:
    root = make_bundle(tmp_path / "b", {})
    per_file = 1024 * 1024 + 1
    for i in range(MAX_TOTAL_BYTES // per_file + 1):  # 64 files: 64 MiB + 64 bytes
        with open(root / f"f{i:02d}.md", "wb") as f:
            f.truncate(per_file)
    error = expect_error("resource_limit", capture_of, root)  # sparse files: ~0.1 s
    assert "total" in error.message


def _nest(root: Path, levels: int, name: str = "d") -> None:
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(levels):
            os.mkdir(name, dir_fd=fd)
            child = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = child
        touch_empty(fd, "x.md")
    finally:
        os.close(fd)


def test_depth_cap(tmp_path: Path) -> None:
    ok = make_bundle(tmp_path / "ok", {})
    _nest(ok, MAX_DEPTH - 1)  # x.md has 64 path segments
    snapshot, _ = load_bundle(str(ok))
    (path,) = snapshot.documents
    assert path.count("/") + 1 == MAX_DEPTH
    deep = make_bundle(tmp_path / "deep", {})
    _nest(deep, MAX_DEPTH)
    expect_error("resource_limit", load_bundle, str(deep))
    deeper = make_bundle(tmp_path / "deeper", {})
    _nest(deeper, 70)
    expect_error("resource_limit", load_bundle, str(deeper))


def test_deep_folder_excluded_by_okfignore_is_not_walked(tmp_path: Path) -> None:
    root = make_bundle(tmp_path / "b", {".okfignore": "/d/\n", "a.md": FM})
    _nest(root, 70)
    snapshot, _ = load_bundle(str(root))
    assert list(snapshot.documents) == ["a.md"]


def test_path_longer_than_4096_bytes_is_a_resource_limit(tmp_path: Path) -> None:
    root = make_bundle(tmp_path / "long", {})
    try:
        _nest(root, MAX_PATH_BYTES // 250 + 1, name="p" * 249)
    except OSError as exc:
        pytest.skip(f"filesystem refuses the long path: {exc}")
    error = expect_error("resource_limit", load_bundle, str(root))
    assert "4096" in error.message


def test_cancelled_load_returns_operation_cancelled(tmp_path: Path) -> None:
    root = make_bundle(tmp_path / "b", {"a.md": FM})
    token = CancelToken()
    token.cancel()
    error = expect_error("operation_cancelled", load_bundle, str(root), token)
    assert error.retryable


# --- reuse ------------------------------------------------------------------------------------


def test_reuse_keeps_unchanged_documents_and_reparses_changed_ones(tmp_path: Path) -> None:
    root = make_bundle(tmp_path / "b", {
        "a.md": FM + "A [b](b.md)\n", "b.md": FM + "B\n", "c.md": FM + "C\n", "sub/d.md": FM,
    })
    first, stats = load_bundle(str(root))
    second, stats = load_bundle(str(root), previous=first, previous_stats=stats)
    assert second.revision == first.revision
    assert all(second.documents[p] is first.documents[p] for p in first.documents)

    # touched (same bytes, new mtime): re-read and re-parsed, revision unchanged
    st = os.stat(root / "b.md")
    os.utime(root / "b.md", ns=(st.st_atime_ns, st.st_mtime_ns + 2_000_000_000))
    third, stats = load_bundle(str(root), previous=second, previous_stats=stats)
    assert third.documents["b.md"] is not second.documents["b.md"]
    assert third.documents["b.md"].text == second.documents["b.md"].text
    assert third.documents["a.md"] is second.documents["a.md"]
    assert third.revision == second.revision

    # changed bytes: new content, new revision
    (root / "c.md").write_text(FM + "C changed\n")
    fourth, stats = load_bundle(str(root), previous=third, previous_stats=stats)
    assert fourth.documents["c.md"].body == "C changed\n"
    assert fourth.documents["a.md"] is third.documents["a.md"]
    assert fourth.revision != third.revision

    # deleted: gone from documents, concepts, stats and edges
    os.unlink(root / "b.md")
    fifth, stats = load_bundle(str(root), previous=fourth, previous_stats=stats)
    assert "b.md" not in fifth.documents and "b" not in fifth.concepts
    assert "b.md" not in stats
    assert fifth.edges == ()
    assert fifth.revision != fourth.revision
    fresh, _ = load_bundle(str(root))
    assert fresh.revision == fifth.revision

    # a new file appears
    (root / "e.md").write_text(FM)
    sixth, _ = load_bundle(str(root), previous=fifth, previous_stats=stats)
    assert "e" in sixth.concepts and sixth.documents["a.md"] is fifth.documents["a.md"]


def test_stats_without_a_previous_snapshot_are_ignored(tmp_path: Path) -> None:
    root = make_bundle(tmp_path / "b", {"a.md": FM})
    first, stats = load_bundle(str(root))
    again, _ = load_bundle(str(root), previous=None, previous_stats=stats)
    assert again.documents["a.md"] is not first.documents["a.md"]
    assert again.documents["a.md"].text == FM


def test_broken_documents_are_reused_too(tmp_path: Path) -> None:
    root = make_bundle(tmp_path / "b", {"bad.md": "---\ntype: [\n---\n", "ok.md": FM})
    first, stats = load_bundle(str(root))
    second, _ = load_bundle(str(root), previous=first, previous_stats=stats)
    assert second.documents["bad.md"] is first.documents["bad.md"]
    assert second.broken == first.broken


@contextmanager
def _passthrough() -> Iterator[None]:
    yield


def test_bundle_error_crosses_a_context_manager(tmp_path: Path) -> None:
    # Regression: BundleError used to be a frozen dataclass, and contextlib's
    # `exc.__traceback__ = ...` turned it into FrozenInstanceError.
    root = make_bundle(tmp_path / "b", {"a.md": b"x" * 10})
    with pytest.raises(BundleError) as info, _passthrough():
        capture_of(root, max_file_bytes=5)
    assert info.value.code == "resource_limit"


# --- regression tests for bugs found in src -------------------------------------------------


_CRASHES = (ValueError, KeyError, AttributeError, IndexError, TypeError)


@pytest.mark.parametrize("value", [
    "!!int abc", "!!float abc", "!!bool abc", '!!int ""', "!!map [1]",
    "!!set [1]", pytest.param("9" * 5000, id="5000-digit-int"),
])
def test_bad_explicit_tags_are_invalid_frontmatter(value: str) -> None:
    doc = parse_document("x.md", f"---\ntype: x\nv: {value}\n---\n".encode())
    assert doc.parse_error is not None and doc.parse_error.code == "invalid_frontmatter"


def test_explicit_timestamp_tag_stays_a_string() -> None:
    doc = parse_document("x.md", b"---\ntype: x\nstale_after: !!timestamp 2026-09-01\n---\n")
    assert doc.parse_error is None
    assert doc.fm["stale_after"] == "2026-09-01"


def test_yaml_error_line_ignores_unicode_line_separators() -> None:
    doc = parse_document("x.md", '---\ntitle: "a\u2028b"\ntype: a\ntype: b\n---\n'.encode())
    assert doc.parse_error is not None
    assert doc.parse_error.line == 4
