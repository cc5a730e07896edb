"""Which files may name a concept, told from their text (``okf.mentions``): a cold call's
edges into one concept parse the files that may link or relate to it, not the bundle, and
find every edge the whole bundle gives, however a link or a reference is spelled."""

from __future__ import annotations

import random
import re
from html.entities import html5
from pathlib import Path

import pytest
from markdown_it.common.entities import entities

from bundle_mcp.cancel import CancelToken
from bundle_mcp.dispatch import Dispatcher, ServeConfig
from bundle_mcp.loader import load_bundle
from bundle_mcp.loader.parse_cache import ParseCache, has_markdown
from bundle_mcp.model import Snapshot
from bundle_mcp.okf.graph import graph_of
from bundle_mcp.okf.mentions import may_name, needle
from bundle_mcp.readers import ALL_READER
from bundle_mcp.snapshots import SnapshotCache

FOLDERS = ("alpha", "beta/deep", "gamma")
COUNT = 30


def test_the_needle_is_the_longest_ascii_run_of_the_last_segment() -> None:
    assert needle("c-runtime/reference/difftime-difftime32-difftime64") == "difftime32"
    assert needle("a/b/x") == "x"
    assert needle("docs/é-x-longer") == "longer"
    assert needle("docs/日本語") is None


def test_the_named_references_read_are_the_ones_markdown_it_decodes() -> None:
    """The filter reads a named reference with the standard library's HTML5 table; the
    Markdown parser decodes with markdown-it's: the same names, the same text."""
    assert all(html5.get(f"{name};") == chars for name, chars in entities.items())


def test_a_percent_escape_counts_exactly_when_it_may_spell_a_character_of_the_name() -> None:
    for code in range(256):
        for escape in (f"%{code:02X}", f"%{code:02x}"):
            text = f"[a](x{escape}y.md)"
            ascii_spells = code < 0x80 and chr(code) in "ne-dle"
            assert may_name(text, 0, None, "f/ne-dle", "p.md") == ascii_spells, escape
            # A byte past ASCII may be part of any character past ASCII.
            assert may_name(text, 0, None, "f/née", "p.md") == (
                code >= 0x80 or chr(code) in "née"), escape
    # The Markdown parsers read a NUL as U+FFFD.
    assert may_name("[a](x\0y.md)", 0, None, "f/x\ufffdy", "p.md")
    assert not may_name("[a](xy.md)", 0, None, "f/x\ufffdy", "p.md")


@pytest.mark.parametrize("body", [
    "[a](other/difftime32.md)",  # the name itself
    "[a](di%66ftime32.md)", "[a](d%69fftime32.md)",  # %66, %69
    "[a](difftime%33%32.md)",  # digits
    "[a](di&#102;ftime32.md)", "[a](di&#x66;ftime32.md)",  # numeric references
    "[a](di&fjlig;time32.md)",  # "fj": looked at, though no such name follows
])
def test_a_body_that_may_spell_the_name_is_looked_at(body: str) -> None:
    text = "---\ntype: Note\n---\n" + body + "\n"
    assert may_name(text, text.index(body), None, "x/difftime32", "p.md")


@pytest.mark.parametrize("body", [
    "[a](other/difftime31.md)", "printf(\"%02d %x %5C\")", "a%2Fb 100% &amp; &lt;",
    "[a](d\\iff\\_time32.md)",  # a backslash stands for punctuation, and no "_" is named
    "[a](di%46ftime32.md)",  # "F": not a character of the name
    "[a](difftime.md) 32",  # a run of the name is not the name
])
def test_a_body_that_cannot_spell_the_name_is_left_out(body: str) -> None:
    text = "---\ntype: Note\n---\n" + body + "\n"
    assert not may_name(text, text.index(body), None, "x/difftime32", "p.md")


@pytest.mark.parametrize(("body", "spells"), [
    ("[a](diff\\-time.md)", True), ("[a](diff%2Dtime.md)", True),
    ("[a](diff&#45;time.md)", True),
    ("[a](difftime.md) - \\_", False), ("[a](pl&lowbar;ain.md)", False),
])
def test_punctuation_in_a_name_is_spelled_by_a_backslash_or_an_escape(
        body: str, spells: bool) -> None:
    text = "---\ntype: Note\n---\n" + body + "\n"
    assert may_name(text, text.index(body), None, "x/diff-time", "p.md") == spells
    assert may_name(text, text.index(body), None, "x/pl_ain", "p.md") == (
        "&lowbar;" in body or "\\_" in body or "&#" in body)  # a number may spell anything


def test_a_file_below_a_concepts_folder_may_name_it_with_a_dot_segment() -> None:
    """``[up](..)`` from ``a/b/c.md`` names ``a``, and ``[here](.)`` names ``a/b``: no
    character of either name is written."""
    text = "---\ntype: Note\n---\n[here](.) [up](..)\n"
    start = text.index("[here]")
    assert may_name(text, start, None, "a/b", "a/b/c.md")
    assert may_name(text, start, None, "a", "a/b/c.md")
    assert not may_name(text, start, None, "a/b", "z/c.md")


def test_the_frontmatter_is_searched_as_written_then_as_loaded() -> None:
    """The name in the block's text counts when the block may declare relations (a loaded
    frontmatter is handed in); a reference escaped in YAML ("\\x66") is found in the loaded
    value, and only a block holding a backslash is searched so."""
    plain = '---\ntitle: "difftime32"\n---\nbody\n'
    assert not may_name(plain, plain.index("body"), None, "x/difftime32", "p.md")
    assert may_name(plain, plain.index("body"), {"title": "difftime32"}, "x/difftime32",
                    "p.md")
    escaped = '---\nrelations:\n  uses:\n    - target: "x/di\\x66ftime32"\n---\nbody\n'
    loaded = {"relations": {"uses": [{"target": "x/difftime32"}]}}
    assert may_name(escaped, escaped.index("body"), loaded, "x/difftime32", "p.md")
    assert may_name(escaped, escaped.index("body"), {"difftime32": 1}, "x/difftime32",
                    "p.md")  # keys
    assert not may_name(escaped, escaped.index("body"),
                        {"relations": {"uses": [{"target": "x/other"}]}}, "x/difftime32",
                        "p.md")
    # No backslash in the block: the loaded values are not searched (nothing could differ).
    other = '---\nrelations:\n  uses:\n    - target: x/other\n---\nbody\n'
    assert not may_name(other, other.index("body"), loaded, "x/difftime32", "p.md")


@pytest.mark.parametrize(("name", "written"), [
    ("it's", "'x/it''s'"),  # a single-quoted scalar doubles the quote
    ("h#sh", "x/h\\#sh"),  # a reference escapes "#" in its concept part
    ("two words", "\"x/two\n      words\""),  # a line folded into a space
])
def test_a_name_yaml_may_spell_otherwise_is_looked_for_by_its_longest_run(
        name: str, written: str) -> None:
    text = f"---\nrelations:\n  uses:\n    - target: {written}\n---\nbody\n"
    start = text.index("body")
    assert may_name(text, start, {"relations": {}}, f"x/{name}", "p.md")
    found = needle(f"x/{name}")
    assert found is not None and found != name
    without = text.replace(found, "zz")
    assert not may_name(without, without.index("body"), {"relations": {}}, f"x/{name}",
                        "p.md")


def _spelled(concept_id: str, rng: random.Random) -> str:
    """A link destination naming ``concept_id``, spelled one of the ways a reader decodes."""
    name = concept_id.rsplit("/", 1)[-1]
    if "#" in name:
        name = name.replace("#", "%23")  # else the fragment's start
    way = rng.randrange(9)
    n = rng.randrange(len(name))
    if way == 1:  # a percent escape of one character
        name = name[:n] + "".join(f"%{b:02X}" for b in name[n].encode()) + name[n + 1:]
    elif way == 2:  # a numeric character reference
        name = name[:n] + f"&#{ord(name[n])};" + name[n + 1:]
    elif way == 3:  # a named one
        for chars, reference in (("fj", "&fjlig;"), ("_", "&lowbar;"), (".", "&period;")):
            name = name.replace(chars, reference)
    elif way == 6:  # a backslash before every punctuation character
        name = re.sub(r"([-_.'])", r"\\\1", name)
    folder = concept_id.rsplit("/", 1)[0]
    target = f"{folder}/{name}"
    if way == 4:
        return f"/{target}"  # no .md: the concept ID itself
    if way == 5:
        return f"/{folder}/./x/../{name}.md#part"
    return f"/{target}.md"


def _write(root: Path, seed: int) -> list[str]:
    """A bundle whose links and relations name concepts in the spellings above, with names
    that share runs of letters (fjord, fjords2, …) or hold punctuation and letters past
    ASCII, relations escaped in YAML, links in reference definitions, and links that name
    the concepts of the folders above them with dot segments."""
    rng = random.Random(seed)
    names = ["fjord", "fjords2", "c-fjord-x", "plain", "pl-ain", "x%y", "pl_ain", "do.t",
             "it's", "h#sh", "é-x"]
    ids = [f"{FOLDERS[n % 3]}/{rng.choice(names)}{n:02d}" for n in range(COUNT)]
    ids += ["beta", "beta/deep"]  # the concepts of two folders of concepts
    (root / "index.md").write_text('---\nokf_version: "0.2"\n---\n# B\n', encoding="utf-8")
    for n, concept_id in enumerate(ids):
        links = " ".join(f"[x]({_spelled(rng.choice(ids), rng)})"
                         for _ in range(rng.randrange(4)))
        if n % 5 == 0:
            links += f"\n\n[see][r{n}]\n\n[r{n}]: {_spelled(rng.choice(ids), rng)}\n"
        if n % 3 == 1:  # a folder: this file's own, or the one above it
            links += " " + rng.choice(["[here](.)", "[up](..)", "[up](x/../..)", "[h](%2E)"])
        relations = ""
        if n % 2 == 0:
            target = rng.choice(ids).replace("#", "\\#")
            way = rng.randrange(3)
            if way == 0:  # double-quoted, some letters escaped
                escaped = "".join(
                    f"\\x{ord(c):02x}" if c.isalnum() and c.isascii() and rng.random() < 0.3
                    else "\\\\" if c == "\\" else c for c in target)
                target = f'"{escaped}"'
            elif way == 1:  # single-quoted
                target = "'" + target.replace("'", "''") + "'"
            elif "'" in target or target[0] == "%":
                target = f'"{target}"'.replace("\\", "\\\\")
            relations = f"relations:\n  uses:\n    - target: {target}\n"
        path = root / f"{concept_id}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"---\ntype: Note\n{relations}---\n# Part\n\nintro {links}\n",
                        encoding="utf-8")
    return ids


@pytest.mark.parametrize("seed", range(6))
def test_a_cold_concepts_edges_are_the_whole_bundles(tmp_path: Path, seed: int) -> None:
    _write(tmp_path, seed)
    whole, _ = load_bundle(str(tmp_path))
    expected = {cid: whole.edges_by_concept.get(cid, ()) for cid in whole.concepts}
    assert any(e.kind == "relation" for edges in expected.values() for e in edges)
    for concept_id in expected:
        cold, _ = load_bundle(str(tmp_path))
        assert cold.inbound is None
        assert cold.edges_of(concept_id) == expected[concept_id], concept_id


def _built(snapshot: Snapshot) -> set[str]:
    return {doc.path for doc in snapshot.documents.built()}


def test_a_cold_get_neighbors_parses_the_concept_and_the_files_naming_it(
    tmp_path: Path,
) -> None:
    """Forty concepts, three of which link to the hub (one with a percent escape) and one
    relates to it; one more mentions a name sharing no run with it. The first get_neighbors
    of a cold server (an empty parse cache) parses the hub and those four; nothing else (the
    card of c00, which the hub links to, is read from the frontmatter its check loaded), and
    answers as a server that built everything."""
    (tmp_path / "bundle").mkdir()
    root = tmp_path / "bundle"
    (root / "index.md").write_text('---\nokf_version: "0.2"\n---\n# B\n', encoding="utf-8")
    for n in range(40):
        (root / f"c{n:02d}.md").write_text(f"---\ntype: Note\n---\n# C {n}\n\nplain text\n",
                                           encoding="utf-8")
    (root / "hubconcept.md").write_text("---\ntype: Note\n---\n# Hub\n\n[out](c00.md)\n",
                                        encoding="utf-8")
    (root / "c01.md").write_text("---\ntype: Note\n---\n[h](hubconcept.md)\n", encoding="utf-8")
    (root / "c02.md").write_text("---\ntype: Note\n---\n[h](hub%63oncept.md)\n",
                                 encoding="utf-8")
    (root / "c03.md").write_text("---\ntype: Note\n---\n[h][r]\n\n[r]: ./hubconcept\n",
                                 encoding="utf-8")
    (root / "c04.md").write_text(
        '---\ntype: Note\nrelations:\n  uses:\n    - target: "hub\\x63oncept"\n---\nx\n',
        encoding="utf-8")
    (root / "c05.md").write_text("---\ntype: Note\n---\n[h](hub.md) concept\n",
                                 encoding="utf-8")
    # An empty parse cache, as on a first start: its index knows no file.
    cache = SnapshotCache(parse_cache=ParseCache(tmp_path / "cache"), watch=False)
    dispatcher = Dispatcher(ServeConfig(bundles=(str(root),)), cache=cache)
    outcome = dispatcher.call("get_neighbors", {"concept_id": "hubconcept"})
    assert not outcome.is_error, outcome.text
    edges = outcome.structured["edges"]
    assert {(e["from"], e["to"], e["kind"]) for e in edges} == {
        ("hubconcept", "c00", "navigation"), ("c01", "hubconcept", "navigation"),
        ("c02", "hubconcept", "navigation"), ("c03", "hubconcept", "navigation"),
        ("c04", "hubconcept", "relation")}
    snapshot = cache.get(str(root), CancelToken())
    assert snapshot.documents.work()["decoded"] == 0
    # c05 says "hub" and "concept" apart, the root index names no concept: neither is parsed.
    assert _built(snapshot) == {"hubconcept.md", "c01.md", "c02.md", "c03.md", "c04.md"}
    warm = Dispatcher(ServeConfig(bundles=(str(root),)))
    for _ in warm.served_snapshot(str(root), CancelToken(), ALL_READER).concepts.values():
        pass  # every document built
    assert warm.call("get_neighbors", {"concept_id": "hubconcept"}).structured == (
        outcome.structured)


def test_a_cold_get_neighbors_of_a_name_of_common_words_parses_only_its_namers(
    tmp_path: Path,
) -> None:
    """Every file says "account" and links to an "account-…" page; two link to
    account-nightly-7. Its first get_neighbors on a cold server parses it and those two (the
    whole name is in no other file), not every file that holds its longest word."""
    root = tmp_path / "bundle"
    (root / "apis").mkdir(parents=True)
    (root / "index.md").write_text('---\nokf_version: "0.2"\n---\n# B\n', encoding="utf-8")
    for n in range(30):
        (root / "apis" / f"account-x{n:02d}.md").write_text(
            f"---\ntype: Note\n---\nThe account [next](account-x{(n + 1) % 30:02d}.md)\n",
            encoding="utf-8")
    (root / "apis" / "account-nightly-7.md").write_text("---\ntype: Note\n---\n# N\n",
                                                        encoding="utf-8")
    for n in (3, 4):
        (root / "apis" / f"account-x{n:02d}.md").write_text(
            "---\ntype: Note\n---\nThe account [n](account-nightly-7.md)\n", encoding="utf-8")
    cache = SnapshotCache(parse_cache=ParseCache(tmp_path / "cache"), watch=False)
    dispatcher = Dispatcher(ServeConfig(bundles=(str(root),)), cache=cache)
    outcome = dispatcher.call("get_neighbors", {"concept_id": "apis/account-nightly-7"})
    assert not outcome.is_error, outcome.text
    assert {e["from"] for e in outcome.structured["edges"]} == {
        "apis/account-x03", "apis/account-x04"}
    snapshot = cache.get(str(root), CancelToken())
    assert _built(snapshot) == {"apis/account-nightly-7.md", "apis/account-x03.md",
                                "apis/account-x04.md"}


def test_a_built_document_is_asked_without_parsing_it(tmp_path: Path) -> None:
    """Documents built but not parsed (a listing builds them all) tell from their text and
    their relations, and those parsed from a few bits: the edges are the same, and only the
    files that may name the concept get their Markdown facts made."""
    _write(tmp_path, 0)
    whole, _ = load_bundle(str(tmp_path))
    cold, _ = load_bundle(str(tmp_path))
    for _ in cold.concepts.values():
        pass  # every document built, none parsed
    assert not any(has_markdown(doc) for doc in cold.documents.built())
    for concept_id in whole.concepts:
        assert cold.edges_of(concept_id) == whole.edges_by_concept.get(concept_id, ())
    parsed = sum(has_markdown(doc) for doc in cold.documents.built())
    assert 0 < parsed < len(cold.documents) and not cold.edges_indexed()
    plain = tmp_path / "plain"
    plain.mkdir()
    for n in range(30):
        (plain / f"p{n:02d}.md").write_text("---\ntype: Note\n---\ntext\n", encoding="utf-8")
    (plain / "hubpage.md").write_text("---\ntype: Note\n---\n[a](p00.md)\n", encoding="utf-8")
    (plain / "p01.md").write_text("---\ntype: Note\n---\n[h](hubpage.md)\n", encoding="utf-8")
    again, _ = load_bundle(str(plain))
    for _ in again.concepts.values():
        pass
    assert [e.source_id for e in again.edges_of("hubpage")] == ["hubpage", "p01"]
    assert {doc.path for doc in again.documents.built() if has_markdown(doc)} == {
        "hubpage.md", "p01.md"}


@pytest.mark.parametrize("seed", range(4))
def test_a_cold_walk_prefetches_each_level_and_answers_as_a_warm_one(
        tmp_path: Path, seed: int) -> None:
    """expand_neighbors, query_subgraph and find_path on a cold server (no parse cache): each
    level's edges come from the files that may name its concepts, in one pass, a subgraph's
    edges among its objects from the edges out of them (no index of every edge is made), and
    the answers are those of a server whose edges were all built."""
    _write(tmp_path, seed)
    ids = sorted(load_bundle(str(tmp_path))[0].concepts)

    def dispatcher() -> tuple[Dispatcher, SnapshotCache]:
        cache = SnapshotCache(parse_cache=ParseCache(None), watch=False)
        return Dispatcher(ServeConfig(bundles=(str(tmp_path),)), cache=cache), cache

    for concept_id in ids[:6]:
        for tool, arguments in (("expand_neighbors", {"entity_ids": [concept_id], "depth": 2}),
                                ("query_subgraph", {"seed_ids": [concept_id], "depth": 2}),
                                ("find_path", {"from_id": concept_id, "to_id": ids[-1]})):
            warm, warm_cache = dispatcher()
            assert warm_cache.get(str(tmp_path), CancelToken()).edges_by_concept  # all built
            cold, cold_cache = dispatcher()
            answer = cold.call(tool, arguments)
            assert answer.structured == warm.call(tool, arguments).structured, (
                tool, concept_id)
            assert not cold_cache.get(str(tmp_path), CancelToken()).edges_indexed(), tool


def test_a_cold_subgraphs_edges_among_objects_are_let_go_once_every_edge_is_indexed(
        tmp_path: Path) -> None:
    """The edges out of a cold subgraph's objects, held by target for the next candidates,
    are let go once the index of every edge answers instead."""
    _write(tmp_path, 0)
    first = sorted(load_bundle(str(tmp_path))[0].concepts)[0]
    cache = SnapshotCache(parse_cache=ParseCache(None), watch=False)
    dispatcher = Dispatcher(ServeConfig(bundles=(str(tmp_path),)), cache=cache)
    arguments = {"seed_ids": [first], "depth": 2}
    answer = dispatcher.call("query_subgraph", arguments)
    snapshot = cache.get(str(tmp_path), CancelToken())
    graph = graph_of(snapshot)
    assert graph._into and not snapshot.edges_indexed()
    assert snapshot.edges_by_concept  # the warm-up's index of every edge
    assert dispatcher.call("query_subgraph", arguments).structured == answer.structured
    assert not graph._into and not graph._into_sources
