"""What a built document holds (issue 29): one object per repeated string, no second copy of
its frontmatter once frozen, its Markdown facts as packed text rather than objects. Parsed and
read back from the parse cache alike: a restarted server must hold what a cold one holds."""

from __future__ import annotations

import dataclasses
import gc
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from bundle_mcp.loader import facts_codec, load_bundle
from bundle_mcp.loader.document import document_rules, parse_document
from bundle_mcp.loader.parse_cache import (
    ParseCache,
    encode_facts,
    has_markdown,
    markdown_from_cache,
    markdown_used,
)
from bundle_mcp.model import (
    Document,
    Link,
    MarkdownFacts,
    Section,
    Snapshot,
    Unfrozen,
    anchors_of,
    thaw,
)
from bundle_mcp.okf.markdown import parse_markdown_reference
from restarts import kept_by, restart
from toolcall import every_document_built


def _concept(n: int, target: str) -> str:
    return (
        "---\n"
        "type: Runbook\n"
        f"title: Concept number {n}\n"
        "tags: [billing, nightly]\n"
        "sources:\n"
        "  - id: s1\n"
        "    last_modified: 2025-03-08\n"
        "relations:\n"
        f"  feeds:\n    - target: {target}\n"
        f"  depends_on:\n    - target: {target}#inputs\n"
        "---\n"
        f"# Concept {n}\n\nIntro[^s1].\n\n"
        "## Inputs\n\nText.\n\n### Daily feed\n\n"
        f"See [the target](/{target}.md#inputs) and [again](/{target}.md#daily-feed).\n\n"
        "## Ownership\n\nTeam.\n\n"
        "[^s1]: The source, https://example.com/1\n"
    )


def _bundle(root: Path) -> str:
    root.mkdir()
    (root / "index.md").write_text('---\nokf_version: "0.2"\n---\n# Bundle\n', encoding="utf-8")
    (root / "a").mkdir()
    for n in range(3):
        (root / "a" / f"c{n}.md").write_text(_concept(n, "a/hub"), encoding="utf-8")
    (root / "a" / "hub.md").write_text(_concept(9, "a/c0"), encoding="utf-8")
    return str(root)


def _parsed_and_read_back(tmp_path: Path) -> tuple[Snapshot, Snapshot]:
    bundle = _bundle(tmp_path / "b")
    cache = ParseCache(tmp_path / "cache")
    first, _ = load_bundle(bundle)
    for doc in first.documents.values():
        doc.markdown  # noqa: B018 (so the cache holds the facts too)
    cache.save(bundle, every_document_built(first.documents))
    second, _ = load_bundle(bundle, cached=cache.load(bundle))
    assert all(markdown_from_cache(doc) for doc in second.documents.values())
    return first, second


def _concepts(snapshot: Snapshot) -> list[Document]:
    return [doc for doc in snapshot.documents.values() if doc.is_concept]


def _counted_decodes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names ("facts", "sections") of the decodes of facts texts made from now on."""
    decoded: list[str] = []

    def counted(name: str, real: Callable[..., object]) -> Callable[..., object]:
        def decode(text: str, known_good: bool = False) -> object:
            decoded.append(name)
            return real(text, known_good)
        return decode

    monkeypatch.setattr(facts_codec, "facts_of_json", counted("facts", facts_codec.facts_of_json))
    monkeypatch.setattr(facts_codec, "sections_of_json",
                        counted("sections", facts_codec.sections_of_json))
    return decoded


@pytest.mark.parametrize("how", ["parsed", "read back"])
def test_repeated_strings_are_one_object(tmp_path: Path, how: str) -> None:
    first, second = _parsed_and_read_back(tmp_path)
    snapshot = first if how == "parsed" else second
    docs = _concepts(snapshot)
    assert len(docs) == 4
    one, other = docs[0], docs[1]
    for doc in docs:
        sections = doc.markdown.sections
        # A breadcrumb holds its section's heading and its parents', not copies of them.
        by_level = {}
        for section in sections:
            by_level[section.level] = section
            assert section.breadcrumb[-1] is section.heading
            for level, crumb in enumerate(section.breadcrumb, start=1):
                assert crumb is by_level[level].heading
        # A link's fragment is the object of the anchor it names, as the same heading in
        # another document is.
        anchors = {s.anchor: s for s in sections}
        for link in doc.markdown.links:
            assert link.fragment is anchors[link.fragment].anchor
            # ... and its concept ID the object the concept it names holds.
            assert link.concept_id is snapshot.documents[link.target].concept_id
        # The relations name the document by its own concept ID object, and their targets
        # are the frozen frontmatter's strings.
        for relation in doc.relations:
            assert relation.source is doc.concept_id
        feeds = next(r for r in doc.relations if r.relation_type == "feeds")
        assert feeds.target is feeds.target_id
        assert doc.fm["relations"]["feeds"][0]["target"] is feeds.target
    for mine, theirs in zip(one.markdown.sections[1:], other.markdown.sections[1:], strict=True):
        assert mine.heading is theirs.heading and mine.anchor is theirs.anchor
    assert one.markdown.footnote_refs[0].label is other.markdown.footnote_defs[0].label
    assert one.relations[0].relation_type is other.relations[0].relation_type
    assert one.relations[0].target is other.relations[0].target
    # The frontmatter's keys and identifier-like values are shared; prose is not interned.
    for key, theirs in zip(one.fm, other.fm, strict=True):
        assert key is theirs
    assert one.fm["type"] is other.fm["type"]
    assert one.fm["tags"][1] is other.fm["tags"][1]
    assert one.fm["sources"][0]["last_modified"] is other.fm["sources"][0]["last_modified"]
    # The documents hold the same facts either way.
    assert [d.markdown for d in docs] == [
        d.markdown for d in _concepts(second if how == "parsed" else first)]


def test_read_back_frontmatter_lets_its_json_go_once_frozen(tmp_path: Path) -> None:
    first, second = _parsed_and_read_back(tmp_path)
    doc = second.documents["a/c1.md"]
    parsed = first.documents["a/c1.md"]
    value = doc.frontmatter_value
    assert isinstance(value, Unfrozen)
    keys = list(parsed.fm)
    # One key read before the mapping is frozen freezes nothing.
    assert [doc.fm_value(k) for k in keys] == [parsed.fm_value(k) for k in keys]
    assert not value.is_frozen()
    assert any(isinstance(r, dict) for r in gc.get_referents(value))
    frozen = doc.fm
    assert value.is_frozen()
    assert frozen == parsed.fm
    # Frozen, it holds the mapping only, and answers every way from it.
    assert not any(isinstance(r, dict) for r in gc.get_referents(value))
    assert doc.fm is frozen and doc.frontmatter is frozen
    assert [doc.fm_value(k) for k in keys] == [parsed.fm_value(k) for k in keys]
    assert doc.fm_value("relations") is frozen["relations"]
    assert doc.fm_value("missing") is None
    # Equal to a holder of the same data, frozen or not (a document compares its fields).
    assert value == Unfrozen(thaw(parsed.fm))
    other = second.documents["a/c2.md"].frontmatter_value
    assert isinstance(other, Unfrozen) and value != other


@pytest.mark.parametrize("how", ["parsed", "read back"])
def test_a_document_keeps_its_facts_as_packed_text_not_objects(tmp_path: Path, how: str) -> None:
    first, second = _parsed_and_read_back(tmp_path)
    doc = (first if how == "parsed" else second).documents["a/c0.md"]
    facts = doc.markdown
    assert facts == parse_markdown_reference(doc)
    # Each read decodes anew: nothing the document holds is a fact object.
    again = doc.markdown
    assert again == facts and again is not facts
    del facts, again
    gc.collect()
    held = [doc, *gc.get_referents(doc), *gc.get_referents(doc.rules.markdown)]
    for value in list(held):
        held.extend(gc.get_referents(value) if isinstance(value, dict) else ())
    assert not any(isinstance(v, (MarkdownFacts, Link, Section)) for v in held)
    assert markdown_used(doc) and has_markdown(doc)


def test_a_damaged_facts_text_is_parsed_instead_and_replaced(tmp_path: Path) -> None:
    first, _ = _parsed_and_read_back(tmp_path)
    parsed = first.documents["a/c0.md"]
    for damaged in ("not json", '{"links": 3}', '{"links": [], "sections": [[1]]}'):
        rules = document_rules(damaged)
        doc = dataclasses.replace(parsed, rules=rules)
        assert markdown_from_cache(doc) and not markdown_used(doc)
        # What a save writes is checked first: the parse's facts, not the damaged text.
        assert encode_facts(doc) == encode_facts(parsed)
        assert doc.markdown == parsed.markdown == doc.markdown


def test_the_anchors_answer_as_a_set_would() -> None:
    for headings in (3, 16, 17, 40):
        text = "---\ntitle: T\n---\n" + "".join(f"## H {n}\n\nx\n\n" for n in range(headings))
        doc = parse_document("a.md", text.encode())
        facts = parse_markdown_reference(doc)
        expected = {s.anchor for s in facts.sections if s.anchor is not None}
        assert set(facts.anchors) == expected and len(facts.anchors) == headings
        assert facts.anchors == anchors_of(facts.sections)
        assert all(a in facts.anchors for a in expected)
        assert "h-99" not in facts.anchors
        assert isinstance(facts.anchors, tuple if headings <= 16 else frozenset)


@pytest.mark.parametrize("how", ["parsed", "read back"])
def test_sections_alone_agree_with_the_facts_and_counting_them_decodes_nothing(
    tmp_path: Path, how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = _parsed_and_read_back(tmp_path)
    for doc in _concepts(first if how == "parsed" else second):
        assert doc.sections == doc.markdown.sections
        assert doc.anchors == doc.markdown.anchors
        # A text known good decodes to the same objects without its values checked again.
        text = encode_facts(doc)
        assert text is not None
        assert facts_codec.facts_of_json(text, known_good=True) == \
            facts_codec.facts_of_json(text) == doc.markdown
        assert facts_codec.sections_of_json(text, known_good=True) == doc.markdown.sections
        assert facts_codec.anchors_of_json(text) == doc.markdown.anchors
        assert doc.section_count == len(doc.markdown.sections)
        assert doc.sliced == (len(doc.markdown.sections) > 1)
    # Once the facts were made, a walk's question (is it cut into sections?) decodes nothing.
    decoded = _counted_decodes(monkeypatch)
    for doc in _concepts(first if how == "parsed" else second):
        assert doc.sliced == (doc.section_count > 1)
    assert decoded == []
    # Its sections alone, from a text known good, make no links.
    doc = _concepts(first if how == "parsed" else second)[0]
    doc.sections  # noqa: B018
    assert decoded == ["sections"]


def test_a_read_back_documents_sections_are_decoded_without_its_links(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A restarted server's first walk asks hundreds of concepts for their section count and
    sections only: from the parse cache's text (never decoded here) those are decoded alone,
    checked the first time and trusted after, and no link is made."""
    first, second = _parsed_and_read_back(tmp_path)
    parsed = {doc.path: (doc.sections, doc.markdown) for doc in _concepts(first)}
    decoded: list[tuple[str, bool]] = []

    def counted(name: str, real: Callable[..., object]) -> Callable[..., object]:
        def decode(text: str, known_good: bool = False) -> object:
            decoded.append((name, known_good))
            return real(text, known_good)
        return decode

    monkeypatch.setattr(facts_codec, "facts_of_json", counted("facts", facts_codec.facts_of_json))
    monkeypatch.setattr(facts_codec, "sections_of_json",
                        counted("sections", facts_codec.sections_of_json))
    for doc in _concepts(second):
        decoded.clear()
        sections, facts = parsed[doc.path]
        # The count and the spans come with the row, nothing decoded.
        assert doc.sliced == (len(sections) > 1)
        assert doc.section_spans == tuple(
            n for s in sections for n in (s.line_start, s.line_end))
        assert decoded == []
        assert doc.sections == sections
        assert doc.sections == sections
        assert decoded == [("sections", False), ("sections", True)]
        assert doc.markdown == facts  # the whole facts, when asked


def test_a_restarted_walk_decodes_only_the_sections_it_renders(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A restarted server's first walk names the sections of every concept it passes by their
    line spans, read back with the facts, and knows each concept's section count from them:
    only the sections the answer renders are decoded, one decode each."""
    bundle = _bundle(tmp_path / "b")
    kept_by(bundle, tmp_path / "cache", lambda _d, snapshot: snapshot.edges_by_concept)
    dispatcher, snapshot = restart(bundle, tmp_path / "cache")
    decoded = _counted_decodes(monkeypatch)
    outcome = dispatcher.call("expand_neighbors", {"bundle_path": bundle, "entity_ids": ["a/hub"],
                                                   "depth": 2, "limit": 12})
    assert not outcome.is_error, outcome
    neighbors = json.loads(outcome.text)["neighbors"]
    rendered = [n for n in neighbors if n["metadata"]["kind"] == "section"]
    reached = json.loads(outcome.text)["total"]
    assert '"a/c0' in outcome.text
    assert rendered and reached > len(neighbors)  # sections were passed and not rendered
    assert decoded == ["sections"] * len(rendered)
    assert all(doc.section_count == 4 for doc in _concepts(snapshot))
    assert len(decoded) == len(rendered)  # the counts came with the spans


def test_a_built_edge_index_gives_a_concepts_outgoing_edges_without_its_facts(
    tmp_path: Path,
) -> None:
    first, second = _parsed_and_read_back(tmp_path)
    fresh, _ = load_bundle(str(tmp_path / "b"))
    expected = {cid: fresh.outgoing_edges(cid) for cid in fresh.concepts}
    second.edges_by_concept  # noqa: B018
    hub = second.documents["a/hub.md"]
    before = markdown_used(hub)
    for cid, edges in expected.items():
        assert second.outgoing_edges(cid) == edges
        assert edges == tuple(e for e in second.edges if e.source_id == cid)
    assert markdown_used(hub) == before


@pytest.mark.parametrize("how", ["parsed", "read back"])
def test_which_concepts_a_document_may_link_to_is_answered_from_kept_bits(
    tmp_path: Path, how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new concept asks every document whether it links to it: never a wrong "no", and, once
    a document's facts were made, no decoding to say so."""
    first, second = _parsed_and_read_back(tmp_path)
    docs = _concepts(first if how == "parsed" else second)
    named = {doc.path: {link.concept_id for link in doc.markdown.links} - {None}
             for doc in docs}
    decoded: list[str] = []
    real = facts_codec.facts_of_json

    def counted(text: str, known_good: bool = False) -> object:
        decoded.append(text)
        return real(text, known_good)

    monkeypatch.setattr(facts_codec, "facts_of_json", counted)
    strangers = [f"elsewhere/c{n}" for n in range(200)]
    for doc in docs:
        for concept_id in named[doc.path]:
            assert doc.rules.may_link_to(doc, {concept_id})
        # Some of 200 IDs it does not name share a bit with one it does; most do not.
        assert sum(doc.rules.may_link_to(doc, {s}) for s in strangers) < 100
    assert decoded == []


def test_list_entries_share_their_nested_objects(tmp_path: Path) -> None:
    """Issue 29: most concepts' list_concepts entries hold equal status states, computation
    summaries and legacy flags; the entries of one pass share one dict for each value, in the
    same key order, and the answer is the one unshared entries give."""
    from bundle_mcp.cancel import CancelToken
    from bundle_mcp.okf.temporal import Reference, reference_from
    from bundle_mcp.okf.versions import resolve_version
    from bundle_mcp.tools import list_concepts

    root = tmp_path / "b"
    root.mkdir()
    for n in range(8):
        status = "status: draft\n" if n % 2 else ""
        (root / f"c{n}.md").write_text(f"---\ntype: Note\ntitle: C{n}\n{status}---\n# C{n}\n",
                                       encoding="utf-8")
    snapshot, _ = load_bundle(str(root))
    list_concepts._warm(snapshot, CancelToken())
    profile = reference_from({}).profile
    legacy = resolve_version(snapshot)["effective"] == "0.1"
    entries = [list_concepts._entry_of(snapshot, concept_id, profile, legacy, {})[0]
               for concept_id in snapshot.concepts]  # kept by the warm-up
    for key in list_concepts.SHARED_KEYS:
        assert len({id(e[key]) for e in entries}) == len({repr(e[key]) for e in entries}), key
    assert len({id(e["status_state"]) for e in entries}) == 2
    unshared = [list_concepts.entry(doc, Reference(profile, None, None), legacy)
                for doc in snapshot.concepts.values()]
    assert [repr(e) for e in entries] == [repr(e) for e in unshared]
