"""The walk reads each concept's precomputed arcs (okf/graph.py ``walk``); these tests hold it to
the edges :meth:`BundleGraph.steps` lists, walked node by node as the rule in ``walk``'s
docstring states it: the same nodes, best edges, edge counts and cut, for every kind of
selection, budget and depth, on a random bundle with links, relations, field edges, sections,
shared tags, loops and projects.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import pytest

from bundle_mcp.cancel import CancelToken
from bundle_mcp.okf import graph as graph_module
from bundle_mcp.okf.graph import (
    COMMUNITY_KIND,
    COMMUNITY_WEIGHT,
    KEY,
    OUTGOING,
    SHARES_COMMUNITY,
    TARGET,
    UNBOUNDED,
    Budget,
    BundleGraph,
    EdgeBudget,
    Entity,
    Found,
    Selection,
    Step,
    entity_type,
    graph_of,
    walk,
)
from bundle_mcp.tools import expand_neighbors, query_subgraph
from bundle_mcp.tools._walk_params import subgraph_selection
from toolcall import run_tool, snapshot_of

FOLDERS = ("p0", "p1", "p2")
COUNT = 36


def _bundle(seed: int) -> dict[str, str]:
    rng = random.Random(seed)
    ids = [f"{FOLDERS[n % 3]}/c{n:02d}" for n in range(COUNT)]
    files = {"index.md": '---\nokf_version: "0.2"\n---\n# Bundle\n'}
    for n, concept_id in enumerate(ids):
        links = "".join(f"[x](/{rng.choice(ids)}.md) " for _ in range(rng.randrange(5)))
        if n % 7 == 0:
            links += f"[me](/{concept_id}.md) "  # a loop
        relations = ""
        if n % 2 == 0:
            # A reference is a concept ID (a fragment names a part of it); DESCRIBES is also
            # a field edge's name, so some keys tie with the field edge of `resource`.
            targets = "".join(f"    - target: {rng.choice(ids)}{rng.choice(['', '#part'])}\n"
                              for _ in range(2))
            kind = rng.choice(["uses", "Feeds", "uses", "DESCRIBES"])
            relations = f"relations:\n  {kind}:\n{targets}"
        field = f"resource: /{rng.choice(ids)}.md\n" if n % 3 == 0 else ""
        tags = ", ".join(rng.sample(["a", "b", "c", "d"], rng.randrange(3)))
        headings = "".join(f"\n# Part {h}\n\ntext {h}\n" for h in range(rng.randrange(4)))
        files[f"{concept_id}.md"] = (
            f"---\ntype: {rng.choice(['Note', 'Table'])}\ntags: [{tags}]\n{relations}{field}---\n"
            f"intro {links}\n{headings}"
        )
    return files


def _offer(
    best: dict[str, tuple[Any, Step, Entity]],
    counts: dict[str, int],
    step: Step,
    node: Entity,
    edges: int = 1,
) -> None:
    key = (-step.weight, step.relationship, step.direction, node.id, step.edge_from,
           step.edge_to)
    target = step.target.id
    counts[target] = counts.get(target, 0) + edges
    if target not in best or key < best[target][0]:
        best[target] = (key, step, node)


def _budget(edges: int | None) -> Budget:
    return UNBOUNDED if edges is None else EdgeBudget(edges)


def _reference(
    graph: BundleGraph,
    seeds: Sequence[Entity],
    selection: Selection,
    depth: int,
    budget: Budget,
    token: CancelToken,
) -> tuple[list[Found], bool]:
    """The walk, node by node over ``graph.steps``, one Step per edge."""
    visited = {seed.id for seed in seeds}
    frontier = sorted(seeds, key=lambda e: e.id)
    found: list[Found] = []
    for distance in range(1, depth + 1):
        best: dict[str, tuple[Any, Step, Entity]] = {}
        counts: dict[str, int] = {}
        for node in frontier:
            for step in graph.steps(node, selection, budget, token, visited):
                if step.target.id not in visited:
                    _offer(best, counts, step, node)
            if budget.exhausted:
                break
        if selection.community and not budget.exhausted:
            carriers: dict[str, tuple[Entity, int]] = {}
            for node in frontier:
                for tag in graph.tags_of(node):
                    first, seen = carriers.get(tag, (node, 0))
                    carriers[tag] = (first, seen + 1)
            members = graph.tag_members(selection.project, token)
            spent = False
            for tag in sorted(carriers):
                node, seen = carriers[tag]
                for other in members.get(tag, ()):
                    if not budget.take():
                        spent = True
                        break
                    if other not in visited:
                        step = Step(graph.concept(other), SHARES_COMMUNITY, OUTGOING,
                                    COMMUNITY_WEIGHT, node.id, other, COMMUNITY_KIND)
                        _offer(best, counts, step, node, seen)
                if spent:
                    break
        reached = [Found(step.target, distance, step, node, counts[target])
                   for target, (_key, step, node) in sorted(best.items())]
        found.extend(reached)
        visited.update(best)
        frontier = [f.entity for f in reached]
        if budget.exhausted or not frontier:
            break
    return found, budget.exhausted


SELECTIONS = {
    "every": Selection.every(),
    "outgoing": Selection.every(incoming=False),
    "project": Selection.every(project="p1"),
    "links": Selection.named(["LINKS_TO"]),
    "typed-folded": Selection.named(["USES", "part_of"], fold_case=True),
    "typed-exact": Selection.named(["Feeds", "SHARES_COMMUNITY"]),
    "fields": Selection.named(["DESCRIBES", "LINKS_TO"], project="p0"),
    "subgraph": subgraph_selection(None),
    "subgraph-sections": subgraph_selection(["PART_OF", "uses"]),
}


@pytest.mark.parametrize("arrays", [False, True], ids=["arc-by-arc", "arrays"])
@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("name", sorted(SELECTIONS))
def test_the_walk_agrees_with_its_steps(seed: int, name: str, arrays: bool) -> None:
    """Arc by arc, and over the walk arrays once the warm-up has built them (for a selection
    of every edge: the others walk arc by arc still)."""
    snapshot = snapshot_of(_bundle(seed))
    graph = graph_of(snapshot)
    selection = SELECTIONS[name]
    token = CancelToken()
    if arrays:
        _warm_walk_arrays(snapshot)
    assert (graph_module._arrays_for(graph, selection) is not None) == (
        arrays and name in {"every", "outgoing", "subgraph"})
    concept_ids = sorted(snapshot.concepts)
    first = graph.concept(concept_ids[seed])
    sections = [s for c in concept_ids for s in graph.sections_of(c)]
    seed_sets = [[first], [first, graph.concept(concept_ids[-1 - seed])]]
    if sections:
        seed_sets.append([sections[seed % len(sections)]])
    for seeds in seed_sets:
        for depth in (1, 2, 3):
            for edges in (None, 1, 5, 17, 60, 400):
                expected, cut = _reference(graph, seeds, selection, depth, _budget(edges), token)
                walked = walk(graph, seeds, selection, depth, _budget(edges), token)
                assert walked.found == tuple(expected), (seeds, depth, edges)
                assert walked.cut == cut
                assert walked.total == len(expected)


def _warm_walk_arrays(snapshot: Any) -> None:
    warm = graph_module.WALK_ARRAYS.warm
    assert warm is not None
    warm(snapshot, CancelToken())


def test_a_walk_never_builds_the_walk_arrays() -> None:
    """Only the warm-up builds them: a walk before it goes arc by arc and builds no
    whole-bundle structure (issue 29: a small call does the work its answer needs). Built,
    they are read-only."""
    snapshot = snapshot_of(_bundle(0))
    graph = graph_of(snapshot)
    start = graph.concept(sorted(snapshot.concepts)[0])
    walk(graph, [start], Selection.every(), 3, UNBOUNDED, CancelToken())
    assert graph_module._arrays_for(graph, Selection.every()) is None
    _warm_walk_arrays(snapshot)
    arrays = graph_module._arrays_for(graph, Selection.every())
    assert arrays is not None
    # Shared by every call on the snapshot: no call can change them.
    assert not any(column.flags.writeable for column in (
        arrays.starts, arrays.other, arrays.edge, arrays.backwards, arrays.walkable,
        arrays.rank, arrays.sections, arrays.sliced))


def test_the_walk_arrays_step_checks_between_its_passes(monkeypatch: pytest.MonkeyPatch
                                                       ) -> None:
    """The warm-up stands aside for a call only at a check of its token: each pass of the
    step over every edge or arc (a column made, one stable sort by one key) comes after one,
    so a call waits for one pass at most (docs/decisions/walk-arrays.md)."""
    import numpy

    from bundle_mcp.okf import walk_arrays

    events: list[str] = []

    class Recording(CancelToken):
        def check(self) -> None:
            events.append("check")
            super().check()

    made = walk_arrays._places

    def places(*args: Any) -> Any:
        events.append("pass")
        return made(*args)

    class Numpy:
        """numpy, each sort recorded."""

        def __getattr__(self, name: str) -> Any:
            return getattr(numpy, name)

        @staticmethod
        def argsort(*args: Any, **kwargs: Any) -> Any:
            events.append("pass")
            return numpy.argsort(*args, **kwargs)

    monkeypatch.setattr(walk_arrays, "_places", places)
    monkeypatch.setattr(walk_arrays, "np", Numpy())
    warm = graph_module.WALK_ARRAYS.warm
    assert warm is not None
    warm(snapshot_of(_bundle(0)), Recording())
    passes = [n for n, event in enumerate(events) if event == "pass"]
    assert len(passes) == 11  # six columns of codes; three sorts for the ranks, two for the order
    assert all(events[n - 1] == "check" for n in passes)


def test_equal_keys_keep_the_first_arc_in_both_walks() -> None:
    """A relation and a field edge of one name between the same two concepts have equal keys:
    the walk keeps the relation (the concept's links and relations come before its field
    edges) and counts both, arc by arc and over the arrays alike."""
    files = {
        "index.md": '---\nokf_version: "0.2"\n---\n# Bundle\n',
        "a.md": "---\ntype: Note\nresource: /b.md\nrelations:\n  DESCRIBES:\n"
                "    - target: b\n---\nA.\n",
        "b.md": "---\ntype: Note\n---\nB.\n",
    }
    snapshot = snapshot_of(files)
    graph = graph_of(snapshot)
    answers = []
    for arrays in (False, True):
        if arrays:
            _warm_walk_arrays(snapshot)
        for start, other in (("a", "b"), ("b", "a")):
            found = walk(graph, [graph.concept(start)], Selection.every(), 1, UNBOUNDED,
                         CancelToken()).found
            (reached,) = found
            assert reached.entity.id == other
            assert (reached.step.kind, reached.step.relationship, reached.edge_count) == (
                "relation", "DESCRIBES", 2)
            answers.append(found)
    assert answers[:2] == answers[2:]


@pytest.mark.parametrize("seed", range(4))
def test_the_walk_tools_answer_the_same_over_the_arrays(seed: int) -> None:
    """expand_neighbors and query_subgraph, whole answers, before and after the warm-up has
    built the walk arrays: byte for byte the same (their defaults walk every edge)."""
    snapshot = snapshot_of(_bundle(seed))
    start = sorted(snapshot.concepts)[seed]
    calls = [(expand_neighbors, {"entity_ids": [start], "depth": depth, "limit": 50,
                                 "include_incoming": incoming})
             for depth in (1, 2, 3) for incoming in (True, False)]
    calls += [(expand_neighbors, {"entity_ids": [start], "depth": depth, "limit": 50,
                                  "types": types})
              for depth in (2, 3) for types in (["Note"], ["section", "Table"])]
    calls += [(query_subgraph, {"seed_ids": [start], "depth": depth}) for depth in (1, 2, 3)]
    before = [run_tool(tool, snapshot, params) for tool, params in calls]
    _warm_walk_arrays(snapshot)
    assert graph_module._arrays_for(graph_of(snapshot), Selection.every()) is not None
    assert [run_tool(tool, snapshot, params) for tool, params in calls] == before


@pytest.mark.parametrize("seed", range(4))
def test_a_pending_levels_nodes_read_as_their_reaches(seed: int) -> None:
    """Over the walk arrays every level's nodes are places (ints), read through the walk:
    each one's ID, entity and weight are those of the Reach it stands for."""
    snapshot = snapshot_of(_bundle(seed))
    graph = graph_of(snapshot)
    _warm_walk_arrays(snapshot)
    start = graph.concept(sorted(snapshot.concepts)[seed])
    places = 0
    for depth in (1, 2, 3):
        for selection in (Selection.every(), Selection.every(incoming=False)):
            walked = walk(graph, [start], selection, depth, UNBOUNDED, CancelToken())
            for distance, level in enumerate(walked.levels, 1):
                weights = walked.negative_weights(level, distance)
                for node, weight in zip(level, weights, strict=True):
                    assert isinstance(node, int)
                    places += 1
                    reach = walked.reach(node, distance)
                    found = walked.finding(node, distance)
                    assert walked.target(node, distance) == reach[TARGET] == found.entity.id
                    assert walked.entity(node, distance) == found.entity
                    assert weight == reach[KEY][0] == -found.step.weight
    assert places


def test_a_walk_builds_arcs_only_for_the_concepts_it_expands() -> None:
    """The arcs are kept per concept, built when a walk first expands one: a walk from one
    concept of a chain builds none for the concepts beyond its depth."""
    files = {f"c{n:02d}.md": f"---\ntype: Note\n---\n[next](c{n + 1:02d}.md)\n"
             for n in range(20)}
    snapshot = snapshot_of(files)
    graph = graph_of(snapshot)
    walk(graph, [graph.concept("c05")], Selection.every(), 2, UNBOUNDED, CancelToken())
    expanded = {concept_id for concept_id in snapshot.concepts if concept_id in graph._arcs}
    assert expanded == {"c04", "c05", "c06"}


@pytest.mark.parametrize("seed", range(3))
def test_walk_tables_stay_bounded_and_answer_as_unbounded_ones(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A graph keeps at most WALK_TABLES_KEPT concepts' walk tables: walks from every concept
    leave each table within it, and a walk whose tables were emptied meanwhile (a cap of 3)
    finds exactly what one with every table kept finds."""
    snapshot = snapshot_of(_bundle(seed))
    token = CancelToken()
    starts = sorted(snapshot.concepts)

    def walks(graph: BundleGraph) -> list[Any]:
        out = []
        for name in sorted(SELECTIONS):
            for start in starts:
                seeds = [graph.concept(start), *graph.sections_of(start)[:1]]
                done = walk(graph, seeds, SELECTIONS[name], 3, UNBOUNDED, token)
                out.append((done.found, done.cut, done.total))
        return out

    unbounded = walks(BundleGraph(snapshot))
    monkeypatch.setattr(graph_module, "WALK_TABLES_KEPT", 3)
    small = BundleGraph(snapshot)
    assert walks(small) == unbounded
    tables = (small._arcs, small._field_arcs, small._section_arcs, small._sections)
    assert all(0 < len(table) <= 3 for table in tables)


@pytest.mark.parametrize("seed", range(2))
@pytest.mark.parametrize("name", sorted(SELECTIONS))
def test_steps_among_are_the_steps_to_those_entities(seed: int, name: str) -> None:
    snapshot = snapshot_of(_bundle(seed))
    graph = graph_of(snapshot)
    selection = SELECTIONS[name]
    token = CancelToken()
    rng = random.Random(seed)
    concepts = [graph.concept(c) for c in sorted(snapshot.concepts)]
    entities = concepts + [s for c in concepts for s in graph.sections_of(c.id)]
    ids = [e.id for e in entities]
    for entity in entities:
        for size in (0, 3, len(ids) // 2, len(ids)):
            among = set(rng.sample(ids, size))
            for loops in (False, True):
                expected = [
                    s for s in graph.steps(entity, selection, UNBOUNDED, token, loops=loops)
                    if s.target.id in among or s.target.id == entity.id
                ]
                found = graph.steps_among(entity, selection, among, token, loops=loops)
                assert list(found) == expected, (entity.id, size, loops)


@pytest.mark.parametrize("seed", range(4))
def test_expand_neighbors_ranks_every_node_it_found(seed: int) -> None:
    """expand_neighbors builds Found only for the nodes it returns; it returns the best of all
    of them by score, distance and ID, and counts every one of the wanted types."""
    snapshot = snapshot_of(_bundle(seed))
    graph = graph_of(snapshot)
    start = sorted(snapshot.concepts)[seed]
    for depth in (1, 2, 3):
        found = walk(graph, [graph.concept(start)], Selection.every(), depth,
                     EdgeBudget(expand_neighbors.MAX_WALK_EDGES), CancelToken()).found
        for types in ([], ["note"], ["Table", "section"]):
            wanted = [f for f in found
                      if not types or entity_type(f.entity).lower() in {t.lower() for t in types}]
            wanted.sort(key=lambda f: (-expand_neighbors.score(f), f.distance, f.entity.id))
            for limit in (1, 5, 24):
                answer = run_tool(expand_neighbors, snapshot, {
                    "entity_ids": [start], "depth": depth, "limit": limit, "types": types,
                }, CancelToken())
                assert answer["total"] == len(wanted)
                assert [n["id"] for n in answer["neighbors"]] == [
                    f.entity.id for f in wanted[:limit]
                ]
