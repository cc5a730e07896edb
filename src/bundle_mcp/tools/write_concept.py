"""write_concept: replace or create one whole concept after validating it; atomic and replayable.

The new file is ``---\\n<frontmatter>\\n---\\n<body>``. It is parsed and checked for OKF
conformance *before* anything is written, so a rejected write changes nothing. The write goes
through :func:`bundle_mcp.writes.apply_writes` against the revision of the snapshot the call was
answered from: a bundle that moved on meanwhile is a ``revision_conflict``, never a lost update.
The request identity is the digest of (tool, concept_id, frontmatter, body), so the same request
sent again replays its durable receipt and returns the same success.
"""

from __future__ import annotations

import hashlib
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
from ..model import Document, Snapshot, canonical_json
from ..okf.ids import concept_id_problem, path_for_concept_id
from ..validation.concepts import conformance, guidance
from ..writes import PlannedWrite, apply_writes
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
        _require_unicode(field, params[field])
    path = path_for_concept_id(concept_id)
    frontmatter = _normalise_frontmatter(params["frontmatter"])
    body = params["body"]
    data = ("---\n" + frontmatter + "---\n" + body).encode("utf-8")
    doc = parse_document(path, data)
    _require_valid(doc, frontmatter, body)
    token.check()

    current = snapshot.documents.get(path)
    receipt = apply_writes(
        params["bundle_path"],
        "sha256:" + snapshot.revision,
        (PlannedWrite(path, None if current is None else current.record.sha256, data),),
        request_digest(concept_id, params["frontmatter"], body),
        token,
    )
    findings = sorted(guidance(doc), key=Diagnostic.sort_key)
    return {
        "status": "success",
        "path": path,
        "base_revision": receipt.base_revision,
        "result_revision": receipt.result_revision,
        "diagnostics": [
            {"severity": d.severity, "file": d.file, "message": d.message}
            for d in findings[:MAX_SUCCESS_DIAGNOSTICS]
        ],
    }


def request_digest(concept_id: str, frontmatter: str, body: str) -> str:
    """The request identity: equal requests replay, any changed byte is a new write."""
    request = {"tool": NAME, "concept_id": concept_id, "frontmatter": frontmatter, "body": body}
    return "sha256:" + hashlib.sha256(canonical_json(request).encode("utf-8")).hexdigest()


def _require_unicode(field: str, value: str) -> None:
    # JSON can carry lone surrogates, which have no UTF-8 form and so cannot be written
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise invalid_field(f"$.{field}", f"{field} contains an unpaired surrogate") from None


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
