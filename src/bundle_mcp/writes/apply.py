"""The apply protocol every write tool follows: identity, replay, revision CAS, plan check, publish.

An apply call (:class:`ApplyCall`) names the revision it was planned against and the digests of
what its caller reviewed (a preview's ``plan_digest``, the migration's proof). :func:`apply_plan`
then, in this order:

0. Every path the request names (``targets``) must be writable for the calling reader, else
   ``operation_rejected`` (:mod:`.scope`): before the revision is compared and before the
   bundle is locked or any file is touched, so a stale revision never hides a refusal and a
   refused call leaves no trace.
1. If the bundle is no longer at the expected revision, the only success is the replay of an
   identical earlier call (same ``request_digest``); anything else is ``revision_conflict``.
2. Rebuilds the plan against the snapshot (the caller's planner, see :class:`Replanned`). A
   planner answers a plan that cannot be applied either by raising (the call fails with its
   error) or with ``rejected`` diagnostics (the call answers ``status: rejected`` and writes
   nothing).
3. Every rebuilt digest must equal the reviewed one, else ``plan_mismatch``.
4. Publishes the changes compare-and-swap through ``apply_writes``, which replays a durable
   receipt of an identical call too, and holds the scope rule for what it publishes.

Conflicts and mismatches send the caller back to the preview tool; a call without one
(``write_concept``) keeps the publication layer's own advice.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..cancel import CancelToken
from ..errors import PLAN_MISMATCH, REVISION_CONFLICT, BundleError, Diagnostic, recovery_step
from ..limits import DEFAULT_CAPS, Caps
from ..model import Snapshot
from ..okf.scopes import FULL_ACCESS, Access
from .plan import FileChange, plan_digest, request_digest, revision_of_snapshot
from .publish import PlannedWrite, Receipt, apply_writes
from .scope import require_writable

__all__ = ["APPLIED", "NOOP", "REJECTED", "ApplyCall", "Applied", "OperationsPlan", "Replanned",
           "apply_plan", "require_plan"]

APPLIED = "applied"
NOOP = "noop"
REJECTED = "rejected"


@dataclass(frozen=True, slots=True)
class ApplyCall:
    """One apply call: who it is, what it was planned against and which digests it reviewed."""

    tool: str
    preview: str | None  # the tool recovery steps send the caller back to; None: there is none
    expected_revision: str
    expected_digests: tuple[str, ...]  # compared, in order, with Replanned.digests
    request_digest: str  # the call's identity: an identical call replays its receipt

    def __post_init__(self) -> None:
        if self.expected_digests and self.preview is None:
            raise ValueError("a call that reviewed a plan must name the preview to run again")

    @classmethod
    def of(
        cls,
        tool: str,
        preview: str | None,
        bound: Mapping[str, Any],
        expected_revision: str,
        expected_digests: tuple[str, ...] = (),
    ) -> ApplyCall:
        """The call whose identity binds ``tool`` and ``bound`` (see :func:`.request_digest`)."""
        return cls(tool, preview, expected_revision, expected_digests,
                   request_digest(tool, bound))

    @classmethod
    def previewed(
        cls,
        tool: str,
        preview: str,
        request: Any,
        params: Mapping[str, Any],
        revision: str,
        planned: str,
    ) -> ApplyCall:
        """The call of an apply tool that sends back its preview's revision and plan digest.

        ``revision`` and ``planned`` are the names of the arguments that carry them; the identity
        binds the normalised ``request`` and both arguments under those names.
        """
        bound = {"request": request, revision: params[revision], planned: params[planned]}
        return cls.of(tool, preview, bound, params[revision], (params[planned],))


@dataclass(frozen=True, slots=True)
class Replanned:
    """A plan rebuilt against the current snapshot, as the protocol checks and publishes it."""

    changes: tuple[FileChange, ...] = ()
    digests: tuple[str | None, ...] = ()  # aligned with ApplyCall.expected_digests
    rejected: tuple[Diagnostic, ...] | None = None  # why the plan cannot be applied; None: it can


@dataclass(frozen=True, slots=True)
class OperationsPlan:
    """The plan of a list of operations (a bundle edit, a concept patch), as its preview shows
    it and its apply re-plans it: one shape for both, so each step below has one home."""

    status: str  # applicable | noop | rejected
    changes: tuple[FileChange, ...]
    diagnostics: tuple[Diagnostic, ...]

    def digest(self, kind: str, snapshot: Snapshot, request: Any) -> str | None:
        """The plan digest the preview reports and the apply sends back (``kind``: the tool
        the digest binds); ``None`` for a rejected plan, which has none."""
        if self.status == REJECTED:
            return None
        return plan_digest(kind, revision_of_snapshot(snapshot), request, self.changes)

    def replanned(self, planned: str | None) -> Replanned:
        """The plan rebuilt for its apply (``planned``: its digest): a rejected plan is
        answered, not raised."""
        if self.status == REJECTED:
            return Replanned(rejected=self.diagnostics)
        return Replanned(self.changes, (planned,))


@dataclass(frozen=True, slots=True)
class Applied:
    """The outcome of an apply call: what it published or replayed, or why it wrote nothing."""

    status: str  # applied | noop | rejected
    base_revision: str
    result_revision: str
    changed_paths: tuple[str, ...]
    diagnostics: tuple[Diagnostic, ...] = ()

    def receipt(self, plan_digest: str | None, **context: Any) -> dict[str, Any]:
        """The receipt a previewed apply answers; ``context`` comes right after ``status``."""
        return {
            "status": self.status,
            **context,
            "base_revision": self.base_revision,
            "result_revision": self.result_revision,
            "plan_digest": plan_digest,
            "changed_paths": list(self.changed_paths),
            "diagnostics": [d.envelope_json() for d in self.diagnostics],
        }


def apply_plan(
    call: ApplyCall,
    snapshot: Snapshot,
    bundle_path: str,
    replan: Callable[[], Replanned],
    token: CancelToken,
    access: Access = FULL_ACCESS,
    *,
    targets: tuple[str, ...],
    caps: Caps = DEFAULT_CAPS,
) -> Applied:
    """Check the scope, then replay, or re-plan, check and publish ``call`` (the module
    docstring has the steps).

    ``targets`` are the files the request names (read from the request, not the bundle), which
    the calling reader must be allowed to write. ``replan`` runs only when the bundle is still
    at ``call.expected_revision``.

    Raises:
        BundleError: ``operation_rejected`` (a target outside the writable folders),
            ``revision_conflict``, ``plan_mismatch``, whatever ``replan`` raises, and the other
            errors of ``apply_writes``.
    """
    require_writable(access, targets)
    receipt = _replay_or_conflict(call, snapshot, bundle_path, token, access, caps)
    if receipt is None:
        plan = replan()
        if plan.rejected is not None:
            expected = call.expected_revision
            return Applied(REJECTED, expected, expected, (), plan.rejected)
        for expected_digest, rebuilt in zip(call.expected_digests, plan.digests, strict=True):
            if rebuilt != expected_digest:
                raise _mismatch(call.preview)  # a call with digests names its preview
        token.check()
        writes = tuple(c.as_write() for c in plan.changes)
        receipt = _publish(call, bundle_path, writes, token, snapshot, access, caps)
    status = APPLIED if receipt.changed_paths else NOOP
    return Applied(status, receipt.base_revision, receipt.result_revision, receipt.changed_paths)


def require_plan(expected: str, actual: str | None, preview: str) -> None:
    """What the apply rebuilt (``actual``, a digest) must be what the caller reviewed.

    For checks a planner makes before it judges its plan (the migration's source).

    Raises:
        BundleError: ``plan_mismatch`` with the recovery step.
    """
    if actual != expected:
        raise _mismatch(preview)


def _mismatch(preview: str | None) -> BundleError:
    return BundleError(
        PLAN_MISMATCH,
        "the plan rebuilt against the current bundle differs from the previewed plan",
        (recovery_step(f"run {preview} again with the same arguments, review the new plan, "
                       "then apply its plan_digest"),),
    )


def _replay_or_conflict(
    call: ApplyCall, snapshot: Snapshot, bundle_path: str, token: CancelToken, access: Access,
    caps: Caps,
) -> Receipt | None:
    """``None`` when the bundle is still at the expected revision (the caller re-plans).

    Otherwise the only success is the replay of an identical earlier call: ``apply_writes``
    checks its durable receipt before it compares revisions.
    """
    if revision_of_snapshot(snapshot) == call.expected_revision:
        return None
    return _publish(call, bundle_path, (), token, snapshot, access, caps)


def _publish(
    call: ApplyCall,
    bundle_path: str,
    writes: tuple[PlannedWrite, ...],
    token: CancelToken,
    like: Snapshot,
    access: Access,
    caps: Caps,
) -> Receipt:
    try:
        return apply_writes(bundle_path, call.expected_revision, writes, call.request_digest,
                            token, like=like, access=access, caps=caps)
    except BundleError as exc:
        if exc.code != REVISION_CONFLICT or call.preview is None:
            raise
        raise _conflict(call.preview) from None


def _conflict(preview: str) -> BundleError:
    return BundleError(
        REVISION_CONFLICT,
        "the bundle changed since the plan was previewed",
        (recovery_step(f"preview again: run {preview} against the current bundle, review "
                       "the new plan, then apply it with its base revision and plan digest"),),
    )
