"""write_concept: replace or create one whole concept after validating it; atomic and replayable.

The new file is ``---\\n<frontmatter>\\n---\\n<body>``. It is parsed and checked for OKF
conformance *before* anything is written, so a rejected write changes nothing. The write goes
through the apply protocol (:func:`bundle_mcp.writes.apply.apply_plan`) against the revision of
the snapshot the call was answered from: a bundle that moved on meanwhile is a
``revision_conflict``, never a lost update. The request identity is the digest of (tool,
concept_id, frontmatter, body), so the same request sent again replays its durable receipt and
returns the same success.
"""

from __future__ import annotations

from typing import Any

from ..errors import Diagnostic
from ..okf.ids import concept_id_problem, path_for_concept_id
from ..toolspec import CallContext, ToolSpec
from ..validation.concepts import guidance
from ..writes.apply import ApplyCall, Replanned, apply_plan
from ..writes.concept_file import checked_concept_file
from ..writes.plan import FileChange, require_utf8, revision_of_snapshot
from ..writes.scope import require_writable
from ._common import invalid_field

NAME = "write_concept"
DESCRIPTION = (
    "Replace (or create) one whole concept file from YAML frontmatter and a Markdown body, "
    "validated first: a rejected write changes nothing and returns diagnostics. Atomic; if "
    "the bundle changes meanwhile: revision_conflict, read again and retry. An identical "
    "request replays its result. Read the concept first; prefer preview_concept_patch for "
    "metadata changes."
)

MAX_SUCCESS_DIAGNOSTICS = 10_000


def run(call: CallContext, params: dict[str, Any]) -> dict[str, Any]:
    snapshot, token = call.snapshot, call.token
    concept_id = params["concept_id"]
    problem = concept_id_problem(concept_id)
    if problem is not None:
        raise invalid_field("$.concept_id", f"concept_id is not a canonical concept ID: {problem}")
    for field in ("concept_id", "frontmatter", "body"):
        require_utf8(params[field], field)
    path = path_for_concept_id(concept_id)
    # The scope first: a reader learns nothing about a file it may not write, not even whether
    # its new content would pass.
    require_writable(call.access, (path,))
    body = params["body"]
    doc, text = checked_concept_file(path, params["frontmatter"], body)

    current = snapshot.documents.get(path)
    change = (
        FileChange(path, None, text, None)
        if current is None
        else FileChange(path, current.text, text, current.record.sha256)
    )
    # no preview and no plan digest: the request itself is the plan, against this snapshot
    apply_call = ApplyCall.of(
        NAME,
        None,
        {"concept_id": concept_id, "frontmatter": params["frontmatter"], "body": body},
        revision_of_snapshot(snapshot),
    )
    applied = apply_plan(
        apply_call, snapshot, call.bundle_path, lambda: Replanned((change,)), token,
        access=call.access, caps=call.caps, targets=(path,),
    )
    findings = sorted(guidance(doc), key=Diagnostic.sort_key)
    return {
        "status": "success",
        "path": path,
        "base_revision": applied.base_revision,
        "result_revision": applied.result_revision,
        "diagnostics": [
            {"severity": d.severity, "file": d.file, "message": d.message}
            for d in findings[:MAX_SUCCESS_DIAGNOSTICS]
        ],
    }


SPEC = ToolSpec(
    name=NAME,
    title="Write concept",
    toolset="write",
    read_only=False,
    needs_parseable=False,  # replacing a broken file is how a broken bundle gets fixed
    output_budget=1 << 20,
    description=DESCRIPTION,
    run=run,
)
