"""A capture after a change reuses its predecessor's work: the concept list is patched with the
files that differ, the broken files are asked again only for those (issue 29: listing and
checking 10,000 files cost ~20 ms on every call after an edit). Whatever the change, the result
must be what a capture with no predecessor gives."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from bundle_mcp.loader import assemble_snapshot, deferred
from bundle_mcp.model import Snapshot

# Names whose IDs sort differently from their paths ("a" and "a-b"), a reserved name, folders.
_NAMES = st.sampled_from(["a", "a-b", "a/b", "a/index", "b", "b/c", "index", "log", "c-d/e"])
_TEXTS = st.sampled_from([
    "---\ntype: Note\ntitle: T\n---\nBody.\n",
    "---\ntype: Note\n---\nOther body.\n",
    "---\ntitle: [unclosed\n---\n",  # does not parse
    "# Heading only\n",
])


def _cells(files: dict[str, str]) -> dict[str, Any]:
    return {f"{name}.md": deferred(f"{name}.md", text.encode("utf-8"))
            for name, text in files.items()}


def _walk_order(cells: dict[str, Any]) -> dict[str, Any]:
    return {p: cells[p] for p in sorted(cells, key=lambda p: p.split("/"))}


def _assembled(cells: dict[str, Any], predecessor: Snapshot | None = None) -> Snapshot:
    return assemble_snapshot(_walk_order(cells), frozenset(), frozenset({""}), (),
                             predecessor=predecessor)


def _seen(snapshot: Snapshot) -> tuple[Any, ...]:
    # A file listed that turns out not to parse is no concept either way (only its parse can
    # tell, and a built broken file is left out of the list up front).
    listed = [(c, p) for c, p in snapshot.concepts.paths.items() if c in snapshot.concepts]
    broken = [doc.path for doc in snapshot.broken]
    return (snapshot.revision, listed, list(snapshot.concepts), broken)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(_NAMES, _TEXTS, max_size=8),
       st.dictionaries(_NAMES, st.none() | _TEXTS, min_size=1, max_size=4),
       st.sets(_NAMES), st.booleans())
def test_a_capture_after_a_change_equals_one_without_a_predecessor(
    files: dict[str, str], changes: dict[str, str | None], built: set[str], checked: bool
) -> None:
    before = _assembled(_cells(files))
    for name in built & set(files):
        before.documents[f"{name}.md"]  # noqa: B018 (built before the change, or not)
    if checked:
        before.broken  # noqa: B018 (the predecessor's answer, when it has one)
    cells = dict(before.documents.cells)
    for name, text in changes.items():
        if text is None:
            cells.pop(f"{name}.md", None)
        else:
            cells.update(_cells({name: text}))
    after = _assembled(cells, predecessor=before)
    alone = _assembled(dict(cells))
    assert after.predecessor() is before
    assert _seen(after) == _seen(alone)


_PATHS = st.sampled_from(["a.md", "a-b.md", "a/b.md", "a/index.md", "a b.md", "b.md", "A.md",
                          "a/b/c.md", "a.b/c.md", "é.md", "z/a.md", "index.md", "a_/x.md"])


@settings(max_examples=200, deadline=None)
@given(st.sets(_PATHS), st.sets(_PATHS, min_size=1))
def test_created_files_take_their_place_in_the_walk_order(
    known: set[str], created: set[str]
) -> None:
    """A refresh puts each created file where the walk would list it, as sorting every path
    again would (``loader.in_walk_order``)."""
    from bundle_mcp.loader import in_walk_order

    def walk(paths: set[str]) -> list[str]:
        return sorted(paths, key=lambda p: p.split("/"))

    before = {p: deferred(p, b"") for p in walk(known)}
    cells = dict(before)
    cells.update({p: deferred(p, b"new") for p in created - known})
    assert list(in_walk_order(cells, before)) == walk(known | created)
