"""concept_diff: the unified diff of one concept's file between two commits, or a commit and
the work tree."""

from __future__ import annotations

from typing import Any

from ..errors import OPERATION_REJECTED, BundleError, recovery_step, resource_limit
from ..model import Snapshot
from ..toolspec import CallContext
from ..vcs.history import file_diff, file_log, resolve
from ._common import require_concept
from ._history import MAX_SCANNED, history_spec, visible, work_tree_of

NAME = "concept_diff"
DESCRIPTION = (
    "The unified diff of a concept's file from one git commit (from) to another (to, default "
    "the work tree), under every name it had. Text block: the diff. Outside git: "
    "operation_rejected."
)
MAX_DIFF_BYTES = 512 * 1024
MAX_PATHS = 64


def run(call: CallContext, params: dict[str, Any]) -> dict[str, Any]:
    doc = require_concept(call.snapshot, params["concept_id"], token=call.token)
    tree = work_tree_of(call)
    start = resolve(tree, params["from"], "$.from")
    end = resolve(tree, params["to"], "$.to") if "to" in params else None
    call.token.check()
    current = tree.prefix + doc.path
    # Every name the file has had: the diff of a renamed file names its old path on one side.
    commits, _complete = file_log(tree, current, MAX_SCANNED)
    names = list(dict.fromkeys([current, *(c.path for c in commits)]))[:MAX_PATHS]
    call.token.check()
    diff = file_diff(tree, start, end, tuple(names), MAX_DIFF_BYTES)
    if diff is None:
        raise resource_limit(
            f"the diff is longer than the {MAX_DIFF_BYTES // 1024} KiB a call returns",
            "diff two commits closer together (concept_history lists them), or read the "
            "file as it is now with read_concept",
        )
    paths = []
    for repo_path in diff.paths:
        path = visible(call, tree, repo_path)
        if path is None:
            # The file lay outside the bundle, or outside the caller's read scope, at one of
            # the two commits: its content there is not the caller's to see.
            raise BundleError(
                OPERATION_REJECTED,
                "at one of the two commits the file lay outside the folders this reader may "
                "read (or outside the bundle); nothing of it is shown",
                (recovery_step("diff commits where the file was in a readable folder: "
                               "concept_history lists them with the path each had"),),
            )
        paths.append(path)
    assert doc.concept_id is not None
    return {
        "concept_id": doc.concept_id,
        "path": doc.path,
        "from": {"revision": params["from"], "commit": start},
        "to": {"revision": params.get("to"), "commit": end},
        "paths": paths,
        "identical": not diff.text,
        "diff": diff.text,
    }


def text(result: dict[str, Any], snapshot: Snapshot) -> str:
    """The diff itself, as git wrote it; a sentence when there is no difference."""
    return str(result["diff"]) or "no difference"


SPEC = history_spec(NAME, "Concept diff", DESCRIPTION, run, text)
