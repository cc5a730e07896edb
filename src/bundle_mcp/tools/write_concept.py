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

from ..cancel import CancelToken
from ..errors import (
    ERROR,
    INVALID_YAML_GRAPH,
    OPERATION_REJECTED,
    RESOURCE_LIMIT,
    BundleError,
    Diagnostic,
    recovery_step,
)
from ..loader.document import parse_document
from ..model import Document, Snapshot
from ..okf.ids import concept_id_problem, path_for_concept_id
from ..validation.concepts import conformance, guidance
from ..writes.apply import ApplyCall, Replanned, apply_plan
from ..writes.plan import FileChange, require_utf8, revision_of_snapshot
from ._common import invalid_field

NAME = "write_concept"
TITLE = "Write concept"
TOOLSET = "write"
READ_ONLY = False
NEEDS_PARSEABLE = False  # replacing a broken file is how a broken bundle gets fixed
NEEDS_BUNDLE_PATH = True  # the dispatcher passes the resolved root as params["bundle_path"]
OUTPUT_BUDGET = 1 << 20
DESCRIPTION = (
    "Replace (or create) one whole concept file from YAML frontmatter and a Markdown body, "
    "validated first: a rejected write changes nothing and returns diagnostics. Atomic; if "
    "the bundle changes meanwhile: revision_conflict, read again and retry. An identical "
    "request replays its result. Read the concept first; prefer preview_concept_patch for "
    "metadata changes."
)

MAX_SUCCESS_DIAGNOSTICS = 10_000


def run(snapshot: Snapshot, params: dict[str, Any], token: CancelToken) -> dict[str, Any]:
    concept_id = params["concept_id"]
    problem = concept_id_problem(concept_id)
    if problem is not None:
        raise invalid_field("$.concept_id", f"concept_id is not a canonical concept ID: {problem}")
    for field in ("concept_id", "frontmatter", "body"):
        require_utf8(params[field], field)
    path = path_for_concept_id(concept_id)
    frontmatter = _normalise_frontmatter(params["frontmatter"])
    body = params["body"]
    text = "---\n" + frontmatter + "---\n" + body
    doc = parse_document(path, text.encode("utf-8"))
    _require_valid(doc, frontmatter, body)

    current = snapshot.documents.get(path)
    change = (
        FileChange(path, None, text, None)
        if current is None
        else FileChange(path, current.text, text, current.record.sha256)
    )
    # no preview and no plan digest: the request itself is the plan, against this snapshot
    call = ApplyCall.of(
        NAME,
        None,
        {"concept_id": concept_id, "frontmatter": params["frontmatter"], "body": body},
        revision_of_snapshot(snapshot),
    )
    applied = apply_plan(call, snapshot, params["bundle_path"], lambda: Replanned((change,)), token)
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


def _normalise_frontmatter(text: str) -> str:
    """LF line ends, ending in exactly the one newline that precedes the closing fence."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text if not text or text.endswith("\n") else text + "\n"


def _require_valid(doc: Document, frontmatter: str, body: str) -> None:
    """The new file must parse, conform, and read back as exactly the frontmatter and body given.

    Raises:
        BundleError: ``operation_rejected`` (``resource_limit`` / ``invalid_yaml_graph`` for
            those parse failures) with one diagnostic per problem.
    """
    problems = list(conformance(doc))
    if (
        doc.parse_error is None
        and problems == []
        and (doc.frontmatter_raw != frontmatter or doc.body != body)
    ):
        # a line '---' inside the frontmatter would close the block early and change both parts
        problems.append(
            Diagnostic(
                code="frontmatter_fence",
                severity=ERROR,
                file=doc.path,
                field="$.frontmatter",
                message="the frontmatter contains a '---' line, which would end the block early",
            )
        )
    if not problems:
        return
    code = OPERATION_REJECTED
    if doc.parse_error is not None and doc.parse_error.code in (RESOURCE_LIMIT, INVALID_YAML_GRAPH):
        code = doc.parse_error.code
    raise BundleError(
        code,
        f"the new version of {doc.path} is not a valid concept; nothing was written",
        (
            *problems,
            recovery_step(
                "fix the frontmatter (a YAML mapping with a non-empty 'type') and call again"
            ),
        ),
    )
