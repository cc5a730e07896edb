"""check_receipt: the deterministic part of attesting one run (OKF v0.2 §10.5 steps 5–6).

The server checks what every client would otherwise have to re-implement: the parameters
against the contract, the receipt's fields, for SQL runtimes the executed SQL against the
sanctioned computation (canonicalised; bind variables compared by the parameter they bind), the
displayed value against the receipt's first result cell, and freshness at ``as_of``. It never
runs the bundle's attester or anything else, and never makes a network call: for a runtime it
cannot canonicalise the verdict is ``unattested`` and names the attester to run.
"""

from __future__ import annotations

from typing import Any

from ..okf.attestation import attest
from ..okf.temporal import reference_from
from ..toolspec import CallContext, ToolSpec
from ._common import MIB
from ._computations import require_computation

NAME = "check_receipt"
DESCRIPTION = (
    "Attest one run of an Attested Computation before showing its value: give the parameters "
    "you bound, the receipt the executor returned, the value you will display and as_of. "
    "Verdict attested, failed (do not display) or unattested (run the named attester), with "
    "each check. Executes nothing."
)


def run(call: CallContext, params: dict[str, Any]) -> dict[str, Any]:
    snapshot, token = call.snapshot, call.token
    doc = require_computation(snapshot, params["concept_id"], token)
    ref = reference_from(params)
    result = attest(snapshot, doc, params["parameters"], params["receipt"],
                    params["displayed_value"], ref)
    token.check()
    assert doc.concept_id is not None
    return {
        "concept_id": doc.concept_id,
        **result,  # verdict … freshness, computation_sha256, in attest's order
        "snapshot_revision": snapshot.revision,
    }


SPEC = ToolSpec(
    name=NAME,
    title="Check receipt",
    toolset="compute",
    read_only=True,
    output_budget=1 * MIB,
    description=DESCRIPTION,
    run=run,
)
