"""What get_computation and check_receipt share: finding the Attested Computation a call names,
and turning a computation that cannot be determined into the error envelope."""

from __future__ import annotations

from ..cancel import CancelToken
from ..errors import (
    ERROR,
    OPERATION_REJECTED,
    BundleError,
    Diagnostic,
    recovery_step,
    resource_limit,
)
from ..model import Document, Snapshot
from ..okf.computations import ATTESTED_COMPUTATION, ComputationUnavailable, is_attested_computation
from ._common import invalid_field, require_concept

# How many computations a "not an Attested Computation" error names, so the agent can retry.
_NAMED = 5


def require_computation(snapshot: Snapshot, concept_id: str, token: CancelToken) -> Document:
    """The Attested Computation ``concept_id`` names.

    Raises:
        BundleError: as :func:`require_concept`, and ``invalid_request`` when the concept is of
            another type (naming some computations the bundle does have).
    """
    doc = require_concept(snapshot, concept_id, token=token)
    if is_attested_computation(doc):
        return doc
    found = doc.fm.get("type")
    kind = f"type {found!r}" if isinstance(found, str) else "no string type"
    others = [c.concept_id for c in snapshot.concepts.values()
              if c.concept_id is not None and is_attested_computation(c)]
    named = ", ".join(others[:_NAMED]) + (" …" if len(others) > _NAMED else "")
    where = (f"computations in this bundle: {named}" if others
             else "this bundle has no Attested Computation concepts")
    raise invalid_field(
        "$.concept_id",
        f"{concept_id} has {kind}, not {ATTESTED_COMPUTATION!r}; {where}",
    )


def unavailable(exc: ComputationUnavailable, doc: Document) -> BundleError:
    """A computation that cannot be determined: ``resource_limit`` when it is too large,
    ``operation_rejected`` otherwise, with the reason as the diagnostic code."""
    if exc.code == "computation_too_large":
        return resource_limit(exc.message, exc.hint)
    return BundleError(
        OPERATION_REJECTED,
        exc.message,
        (Diagnostic(code=exc.code, severity=ERROR, file=doc.path, message=exc.message),
         recovery_step(exc.hint)),
    )
