"""concept_history: the git commits that touched one concept's file, following renames."""

from __future__ import annotations

from typing import Any

from ..toolspec import CallContext
from ..vcs.history import file_log
from ._common import limit_from, require_concept
from ._history import MAX_SCANNED, history_spec, visible, work_tree_of

NAME = "concept_history"
DESCRIPTION = (
    "The git commits that touched a concept's file, newest first, following renames: commit, "
    "date, author, subject and the file's path then. For a bundle inside a git work tree; "
    "otherwise operation_rejected."
)
MAX_SUBJECT = 1000


def run(call: CallContext, params: dict[str, Any]) -> dict[str, Any]:
    doc = require_concept(call.snapshot, params["concept_id"], token=call.token)
    limit = limit_from(params)
    tree = work_tree_of(call)
    call.token.check()
    commits, complete = file_log(tree, tree.prefix + doc.path, MAX_SCANNED)
    shown: list[dict[str, Any]] = []
    omitted = 0
    for commit in commits:
        path = visible(call, tree, commit.path)
        if path is None:
            omitted += 1
            continue
        shown.append({
            "commit": commit.commit,
            "date": commit.date,
            "author": commit.author,
            "subject": commit.subject[:MAX_SUBJECT],
            "path": path,
        })
    assert doc.concept_id is not None
    return {
        "concept_id": doc.concept_id,
        "path": doc.path,
        "total": len(shown),
        "truncated": len(shown) > limit or not complete,
        "omitted": omitted,
        "commits": shown[:limit],
    }


SPEC = history_spec(NAME, "Concept history", DESCRIPTION, run)
