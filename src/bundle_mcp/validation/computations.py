"""Attested Computation concepts (OKF v0.2 §10): the contract and the computation it sanctions.

Every finding here is guidance, never an ERROR: §11 makes only parseable frontmatter, a
non-empty ``type`` and the reserved files' structure conformance rules, and asks consumers to
treat every other constraint as soft. So ``runtime``, which §10.2 makes REQUIRED for the type,
is a WARN when missing, like a malformed contract, an unreadable computation and parameters the
SQL does not match; what only limits a consumer (no executor, no attester) is an INFO.

The rules apply whatever the bundle's effective OKF version: the contract keys are v0.2
additions (§13.2), so a 0.1 bundle simply has none, and one that does means them as v0.2 does.

Path problems of ``computation``, ``executor.resource`` and ``attester.resource`` (names
nothing, climbs above the root) are :mod:`.fields`' findings; the computation rule does not
report the same path a second time.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from ..errors import Diagnostic
from ..model import Document, Snapshot
from ..okf.computations import (
    ATTESTED_COMPUTATION,
    INLINE,
    ComputationText,
    ComputationUnavailable,
    Contract,
    computation_text,
    contract_of,
    is_attested_computation,
)
from ..okf.field_paths import BUNDLE
from ..okf.sql import bind_variables
from .fields import holds_code
from .findings import info, key_line, warn

SPEC_CONTRACT = "OKF v0.2 §10.2: an Attested Computation's contract is its frontmatter"
SPEC_COMPUTATION = "OKF v0.2 §10.3: the computation binds only the declared parameters"
# The keys §10 defines for the Attested Computation type; elsewhere they mean nothing.
CONTRACT_KEYS = ("runtime", "parameters", "computation", "executor", "attester")


def computation_findings(snapshot: Snapshot, doc: Document) -> Iterator[Diagnostic]:
    if doc.parse_error is not None or doc.frontmatter is None:
        return
    if not is_attested_computation(doc):
        yield from _keys_outside_the_type(doc)
        return
    fm = doc.fm
    contract = contract_of(snapshot, doc)
    if "runtime" not in fm:
        yield warn(doc.path, "computation_runtime_missing",
                   "Attested Computation has no 'runtime': nothing says how to run it or what "
                   "its parameters mean", 1, field="runtime", spec_ref=SPEC_CONTRACT)
    for problem in contract.problems:
        where = problem.split(":", 1)[0]
        yield warn(doc.path, "computation_contract_invalid", f"contract field {problem}",
                   key_line(doc, _top_key(where)), field=where, spec_ref=SPEC_CONTRACT)
    raw = fm.get("computation")
    if isinstance(raw, str) and holds_code(raw):
        yield warn(doc.path, "computation_contract_invalid",
                   "contract field computation: holds the code itself, not a path to it; put "
                   "the code in one code block under '# Computation' (§10.3)",
                   key_line(doc, "computation"), field="computation", spec_ref=SPEC_CONTRACT)
    else:
        yield from _computation(snapshot, doc, contract)
    executor = fm.get("executor")
    if executor is None:
        yield info(doc.path, "computation_executor_missing",
                   "Attested Computation has no 'executor': a consumer is not told how to run "
                   "it", 1, field="executor")
    elif isinstance(executor, Mapping) and not executor.get("receipt"):
        # A malformed (non-empty) receipt is a contract problem above; this is its absence.
        yield warn(doc.path, "computation_receipt_missing",
                   "'executor' declares no 'receipt': a run returns no named evidence for the "
                   "attester to inspect", key_line(doc, "executor"), field="executor.receipt",
                   spec_ref=SPEC_CONTRACT)
    if fm.get("attester") is None:
        yield info(doc.path, "computation_attester_missing",
                   "Attested Computation has no 'attester': a consumer cannot check a run's "
                   "receipt", 1, field="attester")


def _computation(snapshot: Snapshot, doc: Document, contract: Contract) -> Iterator[Diagnostic]:
    target = contract.computation
    if target is not None and target.kind == BUNDLE and not target.exists:
        return  # the computation field's path finding says it (validation.fields)
    try:
        text = computation_text(snapshot, doc, contract)
    except ComputationUnavailable as e:
        line = key_line(doc, "computation") if target is not None else 1
        yield warn(doc.path, e.code, f"{e.message}; {e.hint}", line, field="computation",
                   spec_ref=SPEC_COMPUTATION)
        return
    if contract.runtime is None:
        return
    declared = tuple(p.name for p in contract.parameters)
    bound = bind_variables(text.text, contract.runtime, declared)
    if bound is None:
        return  # not a SQL runtime: its parameters are not bind variables
    for name in declared:
        if name not in bound:
            yield warn(doc.path, "computation_parameter_unused",
                       f"parameter {name!r} is declared but the {contract.runtime} computation "
                       f"never binds it", key_line(doc, "parameters"),
                       field=_parameter_field(doc, name), spec_ref=SPEC_COMPUTATION)
    for name in bound:
        if name not in declared:
            yield warn(doc.path, "computation_parameter_undeclared",
                       f"the {contract.runtime} computation binds {_marker(name)} but "
                       "'parameters' does not declare it", _text_line(doc, text),
                       field="parameters", spec_ref=SPEC_COMPUTATION)


def _keys_outside_the_type(doc: Document) -> Iterator[Diagnostic]:
    found = [key for key in CONTRACT_KEYS if key in doc.fm]
    if not found:
        return
    kind = doc.fm.get("type")
    near = isinstance(kind, str) and kind.strip().casefold() == ATTESTED_COMPUTATION.casefold()
    hint = (f" (the type is written {kind!r}; it is exactly {ATTESTED_COMPUTATION!r})"
            if near else "")
    for key in found:
        yield info(doc.path, "contract_field_ignored",
                   f"'{key}' has a meaning only on type {ATTESTED_COMPUTATION!r}; here it is "
                   f"an extension key{hint}", key_line(doc, key), field=key)


def _top_key(where: str) -> str:
    return where.split(".", 1)[0].split("[", 1)[0]


def _parameter_field(doc: Document, name: str) -> str:
    """``parameters[i]`` for the entry that declares ``name``, as written."""
    raw = doc.fm.get("parameters")
    for n, entry in enumerate(raw if isinstance(raw, tuple) else ()):
        if isinstance(entry, Mapping) and entry.get("name") == name:
            return f"parameters[{n}]"
    return "parameters"


def _marker(name: str) -> str:
    # A positional marker past the declared list keeps its own spelling ($3, ?3).
    return name if name[:1] in "$?:" else repr(name)


def _text_line(doc: Document, text: ComputationText) -> int | None:
    """Where the finding points: the inline block, else the ``computation`` field."""
    return text.line_start if text.source == INLINE else key_line(doc, "computation")
