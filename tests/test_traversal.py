"""expand_neighbors and fetch_slice: unit tests, generated stress bundles and property tests.

Bundles are built in memory (parse_document + Snapshot) so a property example costs
milliseconds; the golden cases of both tools run in tests/test_golden.py, and this module checks
that each tool pins both a success and an error outcome.

Profiles: ``HYPOTHESIS_PROFILE`` picks one of the profiles tests/ registers (ci: 50, dev: 200);
without them the property tests run 50 examples.
"""

from __future__ import annotations

import os
import types
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from bundle_mcp.cancel import CancelToken
from bundle_mcp.contracts import ContractSet
from bundle_mcp.dispatch import to_json
from bundle_mcp.errors import BundleError
from bundle_mcp.loader.document import parse_document
from bundle_mcp.model import Snapshot, revision_of
from bundle_mcp.okf.graph import ELLIPSIS, clip, preview, resolve
from bundle_mcp.okf.names import concept_name
from bundle_mcp.okf.sections import section_text
from bundle_mcp.tools import expand_neighbors, fetch_slice
from bundle_mcp.tools.fetch_slice import share, window_start
from toolcall import run_tool

try:
    from tests import golden_runner
except ImportError:  # pytest run without the repository root on sys.path
    import golden_runner  # type: ignore[no-redef]

TOOLS = ("expand_neighbors", "fetch_slice")
CONTRACTS = ContractSet()


def _examples() -> int:
    try:
        return settings.get_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev")).max_examples
    except InvalidArgument:  # the profiles are registered by another test module
        return 50


EXAMPLES = _examples()


def snapshot_of(files: Mapping[str, str]) -> Snapshot:
    """An immutable snapshot of ``{path: text}`` without touching the disk."""
    documents = {path: parse_document(path, text.encode("utf-8")) for path, text in files.items()}
    concepts = {
        d.concept_id: d
        for d in documents.values()
        if d.concept_id is not None and d.parse_error is None
    }
    directories = {""}
    for path in files:
        parts = path.split("/")[:-1]
        directories.update("/".join(parts[: n + 1]) for n in range(len(parts)))
    return Snapshot(
        revision=revision_of([d.record for d in documents.values()]),
        documents=types.MappingProxyType(documents),
        concepts=types.MappingProxyType(dict(sorted(concepts.items()))),
        assets=frozenset(),
        directories=frozenset(directories),
        skipped=(),
    )


def call(tool: str, snapshot: Snapshot, **params: Any) -> dict[str, Any]:
    """Run a tool on a snapshot and check its result against the output contract."""
    module = expand_neighbors if tool == "expand_neighbors" else fetch_slice
    CONTRACTS.check_input(tool, params)
    result = run_tool(module, snapshot, params, CancelToken())
    CONTRACTS.check_output(tool, result)
    return result


def concept(type_: str = "note", title: str | None = "T", body: str = "Body.\n", **fm: str) -> str:
    lines = [f"type: {type_}"]
    if title is not None:
        lines.append(f"title: {title}")
    lines.extend(f"{k}: {v}" for k, v in fm.items())
    return "---\n" + "\n".join(lines) + "\n---\n" + body


# --------------------------------------------------------------------------------------------
# Text bounds


@pytest.mark.parametrize(
    ("text", "limit", "expected"),
    [
        ("short", 10, ("short", False)),
        ("exactly10!", 10, ("exactly10!", False)),
        ("alpha beta gamma", 12, ("alpha beta" + ELLIPSIS, True)),
        ("alpha beta gamma", 0, ("", True)),
        ("alpha beta gamma", 1, (ELLIPSIS, True)),
        ("x" * 40, 10, ("x" * 9 + ELLIPSIS, True)),  # one long word: hard cut
        ("a " + "x" * 40, 10, ("a xxxxxxx" + ELLIPSIS, True)),  # boundary too early: hard cut
        ("line one\nline two", 12, ("line one" + ELLIPSIS, True)),
        ("", 0, ("", False)),
    ],
)
def test_clip_cuts_on_a_word_boundary_within_the_limit(
    text: str, limit: int, expected: tuple[str, bool]
) -> None:
    assert clip(text, limit) == expected
    assert len(clip(text, limit)[0]) <= max(limit, 0)


def test_preview_collapses_whitespace_and_reads_only_what_it_needs() -> None:
    assert preview("  a\n\n b\tc  ", 100) == ("a b c", False)
    huge = "word " * 4_000_000  # 20 MB
    text, cut = preview(huge, 50)
    assert cut and len(text) <= 50 and text.endswith(ELLIPSIS)


@pytest.mark.parametrize(
    ("budget", "lengths", "expected"),
    [
        (100, [10, 200, 200], [10, 45, 45]),
        (100, [10, 20, 30], [10, 20, 30]),
        (0, [5, 5], [0, 0]),
        (7, [100, 100, 100], [2, 2, 3]),
        (50, [], []),
    ],
)
def test_share_gives_short_texts_their_length_and_splits_the_rest(
    budget: int, lengths: list[int], expected: list[int]
) -> None:
    assert share(budget, lengths) == expected


@pytest.mark.parametrize(
    ("anchor", "window", "count", "start"),
    [(None, 3, 10, 0), (5, 3, 10, 4), (5, 4, 10, 4), (0, 3, 10, 0), (9, 3, 10, 7),
     (2, 64, 5, 0), (4, 1, 5, 4)],
)
def test_window_centres_on_the_anchor_and_slides_inward(
    anchor: int | None, window: int, count: int, start: int
) -> None:
    assert window_start(anchor, window, count) == start


# --------------------------------------------------------------------------------------------
# Entities and names


def test_resolve_concepts_and_locators() -> None:
    snap = snapshot_of(
        {
            "a b.md": concept(body="Intro.\n\n# One\n\nx\n"),
            "a.md#L1-L2.md": concept(),  # a concept ID that reads like a locator
            "a.md": concept(body="# H\n\ntext\n"),
            "%41.md": concept(body="pre\n\n# Z\n\nz\n"),
        }
    )
    assert resolve(snap, "a b", None).id == "a b"
    found = resolve(snap, "a%20b.md#L7-L9", None)
    assert found is not None and found.section is not None and found.concept_id == "a b"
    assert resolve(snap, "a b.md#L7-L9", None).id == "a%20b.md#L7-L9"
    assert resolve(snap, "a b.md#L7-L10", None) is None  # stale range
    assert resolve(snap, "a b.md#L6-L9", None) is None
    assert resolve(snap, "a b.md#L0-L1", None) is None
    assert resolve(snap, "a.md#L1-L2", None).section is None  # the concept wins
    assert resolve(snap, "%FF.md#L5-L5", None) is None
    # A file name holding '%' is found by its literal spelling as well as the encoded one.
    assert resolve(snap, "%2541.md#L7-L9", None).concept_id == "%41"
    assert resolve(snap, "%41.md#L7-L9", None).concept_id == "%41"
    assert resolve(snap, "missing", None) is None


def test_resolve_hides_everything_outside_the_project() -> None:
    snap = snapshot_of({"p/x.md": concept(), "q/y.md": concept()})
    assert resolve(snap, "p/x", "p") is not None
    assert resolve(snap, "q/y", "p") is None


def test_names_fall_back_from_title_to_heading_to_last_segment() -> None:
    snap = snapshot_of(
        {
            "d/titled.md": concept(title="Title"),
            "d/headed.md": concept(title=None, body="intro\n\n## First *heading*\n"),
            "d/bare.md": concept(title=None, body="no heading\n"),
        }
    )
    names = {cid: concept_name(doc) for cid, doc in snap.concepts.items()}
    assert names == {"d/bare": "bare", "d/headed": "First heading", "d/titled": "Title"}


# --------------------------------------------------------------------------------------------
# Walk rules


def test_best_edge_wins_and_counts_every_edge_from_the_previous_hop() -> None:
    snap = snapshot_of(
        {
            "a.md": concept(tags="[t]", relations="{calls: [{target: b#part}]}",
                            body="[b](b.md)\n"),
            "b.md": concept(tags="[t]"),
        }
    )
    result = call("expand_neighbors", snap, entity_ids=["a"])
    (b,) = result["neighbors"]
    assert (b["relationship"], b["score"], b["direction"]) == ("calls", 1.0, "outgoing")
    assert b["metadata"]["edge"] == {"from": "a", "to": "b#part"}
    assert b["metadata"]["edge_count"] == 3  # relation, link, shared tag


def test_direction_is_relative_to_the_predecessor() -> None:
    snap = snapshot_of(
        {
            "a.md": concept(body="[b](b.md)\n"),
            "b.md": concept(),
            "c.md": concept(body="[b](b.md)\n"),
        }
    )
    result = call("expand_neighbors", snap, entity_ids=["a"], depth=2)
    rows = {n["id"]: n for n in result["neighbors"]}
    assert rows["b"]["direction"] == "outgoing"
    # c links to b: seen from b (its predecessor) that edge comes in, though c is 2 hops out.
    assert (rows["c"]["direction"], rows["c"]["metadata"]["predecessor"]) == ("incoming", "b")


def test_sections_only_for_sliced_concepts_and_only_over_incoming_part_of() -> None:
    sliced = concept(body="pre\n\n# A\n\na\n\n# B\n\nb\n")
    snap = snapshot_of({"s.md": sliced, "u.md": concept(body="# Only\n\ntext\n")})
    rows = call("expand_neighbors", snap, entity_ids=["s", "u"], limit=24)["neighbors"]
    # Equal scores order by ID in code-point order (L11 before L5), never by hash order.
    assert [n["id"] for n in rows] == ["s.md#L11-L13", "s.md#L5-L6", "s.md#L7-L10"]
    assert [n["metadata"]["passage_index"] for n in rows] == [2, 0, 1]
    assert all(n["metadata"]["widen_with"] == "fetch_slice" for n in rows)
    assert all(n["metadata"]["parent_entity_id"] == "s" for n in rows)
    outgoing = call("expand_neighbors", snap, entity_ids=["s"], include_incoming=False)
    assert outgoing["neighbors"] == []
    no_part_of = call("expand_neighbors", snap, entity_ids=["s"], relationship_types=["calls"])
    assert no_part_of["neighbors"] == []


def test_cancelled_call_returns_nothing() -> None:
    snap = snapshot_of({"a.md": concept(body="[b](b.md)\n"), "b.md": concept()})
    token = CancelToken()
    token.cancel()
    for module, params in (
        (expand_neighbors, {"entity_ids": ["a"]}),
        (fetch_slice, {"entity_id": "a"}),
    ):
        with pytest.raises(BundleError) as caught:
            run_tool(module, snap, params, token)
        assert caught.value.code == "operation_cancelled"


# --------------------------------------------------------------------------------------------
# Generated stress bundles


def hub_files(linkers: int = 5_000) -> dict[str, str]:
    """``hub`` with 10,000 incoming edges: each linker links to it and cites it (a relation
    with its own fragment), and every linker shares the tag ``bulk`` (a 5,000-wide community)."""
    files = {"hub.md": concept(title="Hub", body="Everything points here.\n")}
    for n in range(linkers):
        files[f"n/node-{n:04d}.md"] = concept(
            title=f"Node {n:04d}",
            tags="[bulk]",
            relations=f"{{cites: [{{target: 'hub#p{n}'}}]}}",
            body="See the [hub](../hub.md).\n",
        )
    return files


@pytest.fixture(scope="module")
def hub_snapshot() -> Snapshot:
    snap = snapshot_of(hub_files())
    assert sum(1 for e in snap.edges if e.target_id == "hub") == 10_000
    return snap


def test_hub_with_10000_incoming_edges_is_bounded(hub_snapshot: Snapshot) -> None:
    shallow = call("expand_neighbors", hub_snapshot, entity_ids=["hub"], limit=5)
    assert shallow["total"] == 5_000 and shallow["truncated"]
    assert [n["id"] for n in shallow["neighbors"]] == [f"n/node-{n:04d}" for n in range(5)]
    assert all(n["relationship"] == "cites" for n in shallow["neighbors"])
    assert all(n["metadata"]["edge_count"] == 2 for n in shallow["neighbors"])

    # Depth 3 from the hub meets a 5,000-member tag community at hop 2 (25 million pairs):
    # the edge cap stops the walk, which keeps what it found and reports truncated.
    deep = call("expand_neighbors", hub_snapshot, entity_ids=["hub"], depth=99, limit=99)
    assert (deep["depth"], deep["limit"], deep["truncated"]) == (3, 24, True)
    assert deep["total"] == 5_000
    again = call("expand_neighbors", hub_snapshot, entity_ids=["hub"], depth=99, limit=99)
    assert to_json(again) == to_json(deep)


def test_community_walk_from_a_leaf_is_capped(hub_snapshot: Snapshot) -> None:
    result = call(
        "expand_neighbors", hub_snapshot, entity_ids=["n/node-0042"], depth=3,
        relationship_types=["SHARES_COMMUNITY"],
    )
    assert result["total"] == 4_999
    assert {n["metadata"]["community"][0] for n in result["neighbors"]} == {"bulk"}
    assert result["truncated"]


def many_sections(count: int = 5_000) -> str:
    parts = ["Preamble before every heading.\n"]
    filler = "word " * 10
    parts.extend(f"\n## Part {n}\n\nText of part {n}, {filler}\n" for n in range(count - 1))
    return concept(title="Big", body="".join(parts))


@pytest.fixture(scope="module")
def big_snapshot() -> Snapshot:
    snap = snapshot_of(
        {"docs/big.md": many_sections(), "docs/ref.md": concept(body="[b](big.md)\n")}
    )
    assert len(snap.concepts["docs/big"].markdown.sections) == 5_000
    return snap


def test_fetch_slice_on_5000_sections(big_snapshot: Snapshot) -> None:
    doc = big_snapshot.concepts["docs/big"]
    middle = doc.markdown.sections[2_500]
    target = f"docs/big.md#L{middle.line_start}-L{middle.line_end}"
    result = call("fetch_slice", big_snapshot, entity_id=target, window=10**6,
                  content_max_chars=10**9)
    assert (result["window"], result["total"], result["passage_total"]) == (64, 64, 5_000)
    assert result["window_start"] == 2_500 - 31
    assert target in [p["id"] for p in result["passages"]]
    assert not result["covers_parent"]
    assert result["content_chars"] <= fetch_slice.MAX_CONTENT_CHARS

    first = call("fetch_slice", big_snapshot, entity_id="docs/big", window=2)
    assert [p["name"] for p in first["passages"]] == ["(preamble)", "Part 0"]


def test_expand_into_5000_sections(big_snapshot: Snapshot) -> None:
    result = call("expand_neighbors", big_snapshot, entity_ids=["docs/ref"], depth=2, limit=24,
                  types=["section"])
    assert result["total"] == 5_000 and result["truncated"]
    assert len(result["neighbors"]) == 24
    # Equal scores fall back to the ID (the locator), never to iteration order.
    ids = [n["id"] for n in result["neighbors"]]
    assert ids == sorted(ids)


# --------------------------------------------------------------------------------------------
# Goldens (tests/test_golden.py runs them through the registry's dispatcher)


GOLDEN_PATHS = [p for p in golden_runner.golden_paths() if p.parent.name in TOOLS]


def test_both_outcomes_are_pinned_for_each_tool() -> None:
    for tool in TOOLS:
        outcomes = {
            golden_runner.load_case(p)["expected"]["is_error"]
            for p in GOLDEN_PATHS
            if p.parent.name == tool
        }
        assert outcomes == {False, True}, tool


# --------------------------------------------------------------------------------------------
# Properties


FOLDERS = ("", "a/", "b/")
REL_TYPES = ("calls", "depends_on")
TAGS = ("x", "y", "z")


@st.composite
def bundles(draw: st.DrawFn) -> dict[str, str]:
    count = draw(st.integers(2, 7))
    ids = [f"{draw(st.sampled_from(FOLDERS))}c{n}" for n in range(count)]
    files = {}
    for cid in ids:
        links = draw(st.lists(st.sampled_from(ids), max_size=3))
        rels = draw(st.lists(st.tuples(st.sampled_from(REL_TYPES), st.sampled_from(ids),
                                       st.sampled_from(["", "#f"])), max_size=3))
        tags = draw(st.lists(st.sampled_from(TAGS), max_size=2))
        headings = draw(st.integers(0, 4))
        preamble = draw(st.booleans())
        body = "Preamble words here.\n" if preamble else ""
        body += "".join(f"[l](/{t}.md) " for t in links) + "\n"
        for h in range(headings):
            words = " ".join(draw(st.sampled_from(["alpha", "beta", "gamma-delta"]))
                             for _ in range(draw(st.integers(0, 12))))
            body += f"\n{'#' * (1 + h % 3)} Head {h}\n\n{words}\n"
        fm = [f"type: {draw(st.sampled_from(['task', 'decision', 'note']))}"]
        if draw(st.booleans()):
            fm.append(f"title: Title of {cid}")
        if tags:
            fm.append(f"tags: [{', '.join(tags)}]")
        if rels:
            fm.append("relations:")
            for rel_type in sorted({r[0] for r in rels}):
                fm.append(f"  {rel_type}:")
                fm.extend(f"    - target: '{t}{frag}'" for r, t, frag in rels if r == rel_type)
        files[f"{cid}.md"] = "---\n" + "\n".join(fm) + "\n---\n" + body
    return files


def entity_ids_of(snap: Snapshot) -> list[str]:
    out = list(snap.concepts)
    for doc in snap.concepts.values():
        out.extend(
            f"{doc.path}#L{s.line_start}-L{s.line_end}".replace(" ", "%20")
            for s in doc.markdown.sections
        )
    return out


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(files=bundles(), data=st.data())
def test_expand_respects_every_bound_it_reports(files: dict[str, str], data: st.DataObject) -> None:
    snap = snapshot_of(files)
    pool = entity_ids_of(snap) + ["missing", "a/c9.md#L1-L1"]
    params: dict[str, Any] = {
        "entity_ids": data.draw(st.lists(st.sampled_from(pool), min_size=1, max_size=12)),
        "depth": data.draw(st.integers(-3, 9)),
        "limit": data.draw(st.integers(-3, 40)),
        "content_max_chars": data.draw(st.integers(-5, 3000)),
        "include_incoming": data.draw(st.booleans()),
        "relationship_types": data.draw(st.lists(st.sampled_from(
            ["LINKS_TO", "part_of", "SHARES_COMMUNITY", "calls", "DEPENDS_ON"]), max_size=3)),
        "types": data.draw(st.lists(st.sampled_from(["task", "Decision", "section"]),
                                    max_size=2)),
    }
    project = data.draw(st.sampled_from([None, *sorted(d for d in snap.directories if d)]))
    if project is not None:
        params["project"] = project
    result = call("expand_neighbors", snap, **params)

    depth, limit = result["depth"], result["limit"]
    content_max = result["filters"]["content_max_chars"]
    assert depth == max(1, min(params["depth"], 3))
    assert limit == max(1, min(params["limit"], 24))
    assert content_max == max(0, min(params["content_max_chars"], 2000))
    rows = result["neighbors"]
    assert len(rows) <= limit and len(rows) <= result["total"]
    assert result["truncated"] == (result["total"] > limit)  # these graphs never hit the cap
    assert len(result["origins"]) <= 8
    assert not set(result["origins"]) & {n["id"] for n in rows}
    assert len({n["id"] for n in rows}) == len(rows)
    keys = [(-n["score"], n["distance"], n["id"]) for n in rows]
    assert keys == sorted(keys)
    folded = {t.casefold() for t in params["types"]}
    for n in rows:
        assert 1 <= n["distance"] <= depth
        assert len(n["content"]) <= content_max
        assert not folded or n["type"].casefold() in folded
        assert project is None or n["metadata"]["path"].startswith(project + "/")
        if params["relationship_types"]:
            allowed = {r.upper() for r in params["relationship_types"]}
            assert n["relationship"].upper() in allowed
        if not params["include_incoming"]:
            assert n["direction"] == "outgoing"
    distinct = list(dict.fromkeys(params["entity_ids"]))
    assert set(distinct[8:]) <= set(result["unresolved"])

    again = call("expand_neighbors", snapshot_of(files), **params)
    assert to_json(again) == to_json(result)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(files=bundles(), data=st.data())
def test_fetch_slice_respects_every_bound_it_reports(
    files: dict[str, str], data: st.DataObject
) -> None:
    snap = snapshot_of(files)
    entity_id = data.draw(st.sampled_from(entity_ids_of(snap)))
    params = {
        "entity_id": entity_id,
        "window": data.draw(st.integers(-3, 80)),
        "content_max_chars": data.draw(st.integers(-10, 400)),
    }
    result = call("fetch_slice", snap, **params)
    window = result["window"]
    budget = max(0, min(params["content_max_chars"], fetch_slice.MAX_CONTENT_CHARS))
    assert window == max(1, min(params["window"], 64))
    passages = result["passages"]
    assert len(passages) == result["total"] <= window
    assert result["content_chars"] == sum(len(p["content"]) for p in passages) <= budget

    entity = resolve(snap, entity_id, None)
    assert entity is not None and result["parent_id"] == entity.concept_id
    doc = entity.doc
    sections = doc.markdown.sections
    assert result["sliced"] == (len(sections) > 1)
    for p in passages:
        raw = (
            section_text(doc, sections[p["passage_index"]])
            if result["sliced"]
            else "\n".join(doc.lines[doc.body_line - 1 :])
        )
        if p["truncated"]:
            head = p["content"].removesuffix(ELLIPSIS)
            assert p["content"] == "" or p["content"].endswith(ELLIPSIS)
            assert raw.startswith(head)
        else:
            assert p["content"] == raw
    if result["sliced"]:
        indexes = [p["passage_index"] for p in passages]
        assert indexes == list(range(result["window_start"], result["window_start"] + len(indexes)))
        if entity.section is not None:
            assert entity.id in [p["id"] for p in passages]
        complete = len(passages) == len(sections) and not any(p["truncated"] for p in passages)
        assert result["covers_parent"] == complete
    else:
        assert result["covers_parent"] == (not passages[0]["truncated"])

    again = call("fetch_slice", snapshot_of(files), **params)
    assert to_json(again) == to_json(result)
