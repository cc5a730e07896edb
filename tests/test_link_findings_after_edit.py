"""After an edit, a document's link findings may be its predecessor's (issue 29: every
document's facts were decoded again on each edit's warm-up). Whatever the change, the report
must be what a capture with no predecessor gives, and an edit that cannot change a document's
findings must take them from the predecessor."""

from __future__ import annotations

import importlib
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from bundle_mcp.cancel import CancelToken
from bundle_mcp.derived import kept
from bundle_mcp.model import Snapshot
from bundle_mcp.okf.temporal import reference_from
from bundle_mcp.validation import ValidateOptions, validate
from toolcall import assembled, cells_of, changed_cells

validation = importlib.import_module("bundle_mcp.validation")

_NAMES = ["a", "b", "c", "d/e", "index", "d/index"]
# Headings whose anchors links name, links with and without fragments, a link to nothing, a
# file that does not parse.
_TEXTS = st.sampled_from([
    "---\ntype: Note\n---\n# A\n\n## Intro\n\nSee [b](b.md#usage) and [c](c.md).\n",
    "---\ntype: Note\n---\n# B\n\n## Usage\n\nSee [a](a.md#intro).\n",
    "---\ntype: Note\n---\n# B\n\n## Other\n\nSee [e](d/e.md#intro) and [x](gone.md).\n",
    "---\ntype: Note\n---\n# C\n\n## Intro\n\n## Usage\n\nNo links.\n",
    "---\ntype: Note\n---\n# Index\n\n[a](a.md) [b](/b.md#usage) [e](d/e.md#nope)\n",
    "---\ntitle: [unclosed\n---\n",
])
_CHANGES = st.dictionaries(st.sampled_from(_NAMES), st.one_of(st.none(), _TEXTS), max_size=3)
OPTIONS = ValidateOptions(reference_from({}), check_links=True)


def _report(snapshot: Snapshot) -> Any:
    return validate(snapshot, OPTIONS, CancelToken())


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.sampled_from(_NAMES), _TEXTS, min_size=1), _CHANGES, _CHANGES)
def test_link_findings_after_changes_equal_findings_made_anew(
    files: dict[str, str], first: dict[str, str | None], second: dict[str, str | None]
) -> None:
    snapshot = assembled(cells_of(files))
    _report(snapshot)
    held = [snapshot]  # a predecessor is held weakly: the server holds it while it warms
    for changes in (first, second):
        cells = changed_cells(snapshot, changes)
        if not cells:
            return
        snapshot = assembled(cells, predecessor=snapshot)
        held.append(snapshot)
        assert _report(snapshot) == _report(assembled(dict(cells)))


def test_an_edit_takes_the_findings_of_documents_that_do_not_link_to_it() -> None:
    files = {
        "a": "---\ntype: Note\n---\n# A\n\n## Intro\n\nSee [b](b.md#usage) and [x](gone.md).\n",
        "b": "---\ntype: Note\n---\n# B\n\n## Usage\n\nText.\n",
        "c": "---\ntype: Note\n---\n# C\n\nSee [x](nowhere.md).\n",
    }
    before = assembled(cells_of(files))
    _report(before)
    found = {p: kept(before, validation.LINK_FINDINGS, p) for p in ("a.md", "b.md", "c.md")}
    assert found["c.md"] and found["a.md"]
    # b loses the heading a's link names: a's findings are made again (a missing anchor now),
    # c's, which names no edited concept, are the very predecessor's.
    cells = changed_cells(before, {"b": "---\ntype: Note\n---\n# B\n\n## Renamed\n\nText.\n"})
    after = assembled(cells, predecessor=before)
    report = _report(after)
    assert report == _report(assembled(dict(cells)))
    assert any(d["code"] == "missing_anchor" for d in report["diagnostics"])
    c = after.documents["c.md"]
    if c.rules.may_link_to(c, {"b"}):
        # The bits a document keeps of the IDs it names hash them, and a process's string
        # hashes vary (PYTHONHASHSEED): "may" was a false positive in this process, and c's
        # findings were made again (one process in 256, PYTHONHASHSEED=41 for one: this
        # assertion failed there before this branch).
        assert kept(after, validation.LINK_FINDINGS, "c.md") == found["c.md"]
    else:
        assert kept(after, validation.LINK_FINDINGS, "c.md") is found["c.md"]
    assert kept(after, validation.LINK_FINDINGS, "a.md") is not found["a.md"]
