"""get_computation: one Attested Computation (OKF v0.2 §10) ready for an agent to run.

The contract, the sanctioned computation text, each path-valued field resolved, who uses it
(the concepts linking to it, §10.4) and the freshness gate of §10.5 step 6. Nothing from the
bundle is executed or fetched.
"""

from __future__ import annotations

from typing import Any

from ..model import Snapshot
from ..okf.computations import (
    ComputationUnavailable,
    computation_text,
    contract_of,
    freshness,
)
from ..okf.names import concept_name
from ..okf.properties import status_state, text_field, trust
from ..okf.sql import bind_variables
from ..okf.temporal import reference_from
from ..toolspec import CallContext, ToolSpec
from ._common import MIB
from ._computations import require_computation, unavailable

NAME = "get_computation"
DESCRIPTION = (
    "One Attested Computation (type: Attested Computation) by concept_id: runtime, parameters, "
    "executor and attester, the sanctioned computation text to run unchanged (bind only the "
    "parameters), who links to it, and the freshness gate at as_of (refuse, warn, ok). "
    "Then check the run's receipt with check_receipt."
)


def run(call: CallContext, params: dict[str, Any]) -> dict[str, Any]:
    snapshot, token = call.snapshot, call.token
    doc = require_computation(snapshot, params["concept_id"], token)
    ref = reference_from(params)
    contract = contract_of(snapshot, doc)
    try:
        text = computation_text(snapshot, doc, contract)
    except ComputationUnavailable as exc:
        raise unavailable(exc, doc) from None
    token.check()
    names = tuple(p.name for p in contract.parameters)
    binds = (bind_variables(text.text, contract.runtime, names)
             if contract.runtime is not None and contract.is_sql else None)
    fm = doc.fm
    assert doc.concept_id is not None
    return {
        "id": doc.concept_id,
        "path": doc.path,
        "title": text_field(fm, "title"),
        "description": text_field(fm, "description"),
        "status": status_state(fm)["effective"],
        "trust": trust(fm),
        "runtime": contract.runtime,
        "attestable": contract.is_sql,
        "parameters": [{"name": p.name, "type": p.type, "required": p.required}
                       for p in contract.parameters],
        "executor": None if "executor" not in fm else {
            "resource": contract.executor.wire() if contract.executor else None,
            "receipt": list(contract.receipt),
        },
        "attester": None if "attester" not in fm else {
            "resource": contract.attester.wire() if contract.attester else None,
        },
        "computation": {
            "source": text.source,
            "field": contract.computation.wire() if contract.computation else None,
            "path": text.path,
            "line_start": text.line_start,
            "line_end": text.line_end,
            "language": text.language,
            "sha256": text.sha256,
            "text": text.text,
        },
        "bind_variables": list(binds) if binds is not None else None,
        "used_by": _used_by(snapshot, doc.concept_id),
        "contract_problems": list(contract.problems),
        "temporal_profile": ref.profile,
        "freshness": freshness(fm, ref),
        "snapshot_revision": snapshot.revision,
    }


def _used_by(snapshot: Snapshot, concept_id: str) -> list[dict[str, str]]:
    """Concepts with a resolved link or typed relation to the computation, by ID."""
    users = {
        edge.source_id
        for edge in snapshot.edges_of(concept_id)
        if edge.target_id == concept_id and edge.source_id != concept_id
    }
    out = []
    for user in sorted(users):
        doc = snapshot.concepts[user]
        out.append({"id": user, "title": concept_name(doc), "type": text_field(doc.fm, "type")})
    return out


SPEC = ToolSpec(
    name=NAME,
    title="Get computation",
    toolset="compute",
    read_only=True,
    output_budget=8 * MIB,
    description=DESCRIPTION,
    run=run,
)
