"""Where each concept sits in the viewer's graph: its folder tree, packed, computed in Python.

A force-directed layout of 1,000 nodes costs seconds in a browser, moves on every run, and still
draws a hairball. A bundle already says how its concepts group: by folder. So each folder is a
box, its own concepts sit inside it on a sunflower spiral (even spacing, no three in a line for
edges to run through, the most-linked nearest the middle), and a folder's sub-folder boxes and
its own spiral are packed into rows. It is linear in the number of concepts, the same on every
run (no randomness, no clock), and the page opens with it at once (a ``preset`` layout); the page
can still run a bounded force layout over what is shown, on request.
"""

from __future__ import annotations

import math
import types
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

# Model units (the page fits them to the screen). Centre-to-centre distance of neighbours on a
# spiral; room a node of the largest size needs.
NODE_GAP = 90.0
NODE_ROOM = 44.0
# A folder box's inner margin, and the extra room above its contents for its label.
FOLDER_PAD = 24.0
LABEL_ROOM = 30.0
BLOCK_GAP = 36.0
_GOLDEN_ANGLE = math.pi * (3.0 - math.sqrt(5.0))
# Vogel's spiral gives each point about pi * c**2 of area: c for the spacing above.
_SPIRAL_C = NODE_GAP / math.sqrt(math.pi)


@dataclass(frozen=True, slots=True)
class Layout:
    """Concept positions (centres) and folder boxes (``x, y, width, height``, top-left)."""

    positions: Mapping[str, tuple[float, float]]
    boxes: Mapping[str, tuple[float, float, float, float]]


@dataclass(frozen=True, slots=True)
class _Block:
    width: float
    height: float
    nodes: tuple[tuple[str, float, float], ...]
    boxes: tuple[tuple[str, float, float, float, float], ...]

    def moved(self, dx: float, dy: float) -> _Block:
        return _Block(
            self.width, self.height,
            tuple((n, x + dx, y + dy) for n, x, y in self.nodes),
            tuple((f, x + dx, y + dy, w, h) for f, x, y, w, h in self.boxes),
        )


def folder_layout(concepts: Iterable[tuple[str, str, float]]) -> Layout:
    """Lay out ``(concept ID, folder, weight)`` triples; a higher weight sits nearer the middle
    of its folder. The root folder is ``""`` and has no box."""
    members: dict[str, list[tuple[str, float]]] = {}
    children: dict[str, set[str]] = {"": set()}
    for concept_id, folder, weight in concepts:
        members.setdefault(folder, []).append((concept_id, weight))
        # Every ancestor of a folder with concepts is a folder of the tree, even if it holds
        # no concept itself (a/b/c.md makes a and a/b).
        path = folder
        while path:
            parent = path.rpartition("/")[0]
            children.setdefault(parent, set()).add(path)
            children.setdefault(path, set())
            path = parent
    block = _place("", members, children)
    return Layout(
        types.MappingProxyType({n: (x, y) for n, x, y in block.nodes}),
        types.MappingProxyType({f: (x, y, w, h) for f, x, y, w, h in block.boxes}),
    )


def _place(folder: str, members: Mapping[str, list[tuple[str, float]]],
           children: Mapping[str, set[str]]) -> _Block:
    parts: list[_Block] = []
    own = sorted(members.get(folder, ()), key=lambda m: (-m[1], m[0]))
    if own:
        parts.append(_spiral([concept_id for concept_id, _ in own]))
    parts.extend(_place(child, members, children) for child in sorted(children.get(folder, ())))
    packed = _pack(parts)
    if not folder:
        return packed
    inner = packed.moved(FOLDER_PAD, FOLDER_PAD + LABEL_ROOM)
    width = packed.width + 2 * FOLDER_PAD
    height = packed.height + 2 * FOLDER_PAD + LABEL_ROOM
    return _Block(width, height, inner.nodes, ((folder, 0.0, 0.0, width, height), *inner.boxes))


def _spiral(ids: list[str]) -> _Block:
    """Vogel's sunflower spiral: point k at radius c·sqrt(k + ½), turned by the golden angle."""
    points = []
    for k, concept_id in enumerate(ids):
        radius = _SPIRAL_C * math.sqrt(k + 0.5) if len(ids) > 1 else 0.0
        angle = k * _GOLDEN_ANGLE
        points.append((concept_id, radius * math.cos(angle), radius * math.sin(angle)))
    min_x = min(x for _, x, _ in points)
    min_y = min(y for _, _, y in points)
    max_x = max(x for _, x, _ in points)
    max_y = max(y for _, _, y in points)
    half = NODE_ROOM / 2
    return _Block(
        max_x - min_x + NODE_ROOM, max_y - min_y + NODE_ROOM,
        tuple((n, round(x - min_x + half, 1), round(y - min_y + half, 1)) for n, x, y in points),
        (),
    )


def _pack(parts: list[_Block]) -> _Block:
    """Shelf packing: blocks by height, left to right in rows about as wide as the whole is
    tall, so the result is roughly square (a screen shows it without much empty room)."""
    if not parts:
        return _Block(0.0, 0.0, (), ())
    if len(parts) == 1:
        return parts[0]
    ordered = sorted(parts, key=lambda b: -b.height)  # stable: equal heights keep name order
    area = sum((b.width + BLOCK_GAP) * (b.height + BLOCK_GAP) for b in ordered)
    row_width = max(max(b.width for b in ordered), math.sqrt(area) * 1.25)
    nodes: list[tuple[str, float, float]] = []
    boxes: list[tuple[str, float, float, float, float]] = []
    x = y = row_height = width = 0.0
    for block in ordered:
        if x > 0 and x + block.width > row_width:
            y += row_height + BLOCK_GAP
            x = row_height = 0.0
        moved = block.moved(x, y)
        nodes.extend(moved.nodes)
        boxes.extend(moved.boxes)
        x += block.width + BLOCK_GAP
        row_height = max(row_height, block.height)
        width = max(width, x - BLOCK_GAP)
    return _Block(width, y + row_height, tuple(nodes), tuple(boxes))
