"""The deterministic part of attestation (OKF v0.2 §10.5 steps 5–6), done without running
anything from the bundle and without a network call.

Given an Attested Computation, the parameter values an agent supplied, the receipt its run
returned and the value it is about to display, :func:`attest` runs a fixed list of checks, each
``{check, ok, detail}``; ``ok`` is ``None`` for a check the server cannot make (the provenance of
a runtime whose computation is not SQL it can canonicalise). The verdict: ``failed`` when any
check fails, else ``unattested`` when one could not be made (the consumer runs the bundle's own
attester for it), else ``attested``.
"""

from __future__ import annotations

import decimal
from collections.abc import Mapping
from typing import Any

from ..model import Document, Snapshot
from .computations import (
    GATE_REFUSE,
    GATE_UNKNOWN,
    GATE_WARN,
    ComputationText,
    ComputationUnavailable,
    Contract,
    computation_text,
    contract_of,
    freshness,
)
from .sql import compare
from .temporal import Reference, parse_date, parse_instant

ATTESTED = "attested"
FAILED = "failed"
UNATTESTED = "unattested"

# Receipt fields that carry the SQL a run executed, and the result, by name (§10.2's example
# receipts: job_id, executed_sql / compiled_sql, result).
SQL_FIELDS = ("executed_sql", "compiled_sql", "sql", "query")
RESULT_FIELDS = ("result", "results", "value", "rows")

_INTEGER = {"integer", "int", "int64", "bigint", "smallint"}
_NUMBER = {"number", "float", "float64", "double", "numeric", "decimal", "bignumeric", "real"}
_STRING = {"string", "text", "varchar", "char"}
_BOOLEAN = {"boolean", "bool"}
_DATE = {"date"}
_INSTANT = {"datetime", "timestamp", "instant"}


def attest(
    snapshot: Snapshot,
    doc: Document,
    parameters: Mapping[str, Any],
    receipt: Mapping[str, Any],
    displayed: Any,
    ref: Reference,
) -> dict[str, Any]:
    """The checks of one run and their verdict: ``{verdict, reasons, checks,
    attester_resource, freshness, computation_sha256}``, where ``computation_sha256`` is the
    digest of the sanctioned computation the checks used (None when it is unavailable; the
    ``computation`` check says why)."""
    contract = contract_of(snapshot, doc)
    checks: list[dict[str, Any]] = [_contract_check(contract)]
    text: ComputationText | None = None
    try:
        text = computation_text(snapshot, doc, contract)
        checks.append(_check("computation", True,
                             f"{text.source} computation in {text.path} "
                             f"(lines {text.line_start}-{text.line_end})"))
    except ComputationUnavailable as exc:
        checks.append(_check("computation", False, f"{exc.message}; {exc.hint}"))
    checks.append(_parameters_check(contract, parameters))
    checks.append(_receipt_fields_check(contract, receipt))
    checks.append(_provenance_check(contract, text, receipt, parameters))
    checks.append(_fidelity_check(contract, receipt, displayed))
    gate = freshness(doc.fm, ref)
    checks.append(_check("freshness", gate["gate"] not in (GATE_REFUSE, GATE_UNKNOWN),
                         f"{gate['gate']}: {gate['detail']}"))
    if any(c["ok"] is False for c in checks):
        verdict = FAILED
    elif any(c["ok"] is None for c in checks):
        verdict = UNATTESTED
    else:
        verdict = ATTESTED
    reasons = [c["detail"] for c in checks if c["ok"] is not True]
    if gate["gate"] == GATE_WARN:
        reasons.append(f"freshness: {gate['detail']}")
    return {
        "verdict": verdict,
        "reasons": reasons,
        "checks": checks,
        "attester_resource": contract.attester.wire() if contract.attester else None,
        "freshness": gate,
        "computation_sha256": text.sha256 if text is not None else None,
    }


def _check(name: str, ok: bool | None, detail: str) -> dict[str, Any]:
    return {"check": name, "ok": ok, "detail": detail}


def _contract_check(contract: Contract) -> dict[str, Any]:
    problems = list(contract.problems)
    if contract.runtime is None:
        problems.insert(0, "runtime: missing (REQUIRED for an Attested Computation, §10.2)")
    if problems:
        return _check("contract", False, "the contract is malformed: " + "; ".join(problems))
    return _check("contract", True, f"runtime {contract.runtime}, "
                  f"{len(contract.parameters)} parameter(s), {len(contract.receipt)} receipt "
                  "field(s)")


def _parameters_check(contract: Contract, supplied: Mapping[str, Any]) -> dict[str, Any]:
    declared = {p.name: p for p in contract.parameters}
    problems = [f"{name!r} is not a declared parameter" for name in sorted(supplied)
                if name not in declared]
    for p in contract.parameters:
        if p.name not in supplied or supplied[p.name] is None:
            if p.required:
                problems.append(f"required parameter {p.name!r} is missing")
            continue
        problem = _type_problem(p.type, supplied[p.name])
        if problem:
            problems.append(f"{p.name!r} {problem}")
    if problems:
        return _check("parameters", False, "; ".join(problems))
    return _check("parameters", True, f"{len(supplied)} value(s) match the "
                  f"{len(contract.parameters)} declared parameter(s)")


def _type_problem(declared: str, value: Any) -> str | None:
    kind = declared.strip().lower()
    if kind in _INTEGER:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif kind in _NUMBER:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    elif kind in _STRING:
        ok = isinstance(value, str)
    elif kind in _BOOLEAN:
        ok = isinstance(value, bool)
    elif kind in _DATE:
        ok = parse_date(value) is not None
    elif kind in _INSTANT:
        ok = parse_instant(value) is not None
    else:
        return None  # a type the spec leaves to the runtime: its value is not judged here
    return None if ok else f"is not a {declared} value"


def _receipt_fields_check(contract: Contract, receipt: Mapping[str, Any]) -> dict[str, Any]:
    if not contract.receipt:
        return _check("receipt_fields", False,
                      "the contract declares no receipt fields (executor.receipt)")
    missing = [f for f in contract.receipt if f not in receipt]
    extra = sorted(f for f in receipt if f not in contract.receipt)
    if missing or extra:
        parts = ([f"missing {', '.join(missing)}"] if missing else []) + (
            [f"undeclared {', '.join(extra)}"] if extra else [])
        return _check("receipt_fields", False, "the receipt's fields differ from "
                      f"executor.receipt: {'; '.join(parts)}")
    return _check("receipt_fields", True,
                  f"exactly the declared fields: {', '.join(contract.receipt)}")


def _provenance_check(
    contract: Contract,
    text: ComputationText | None,
    receipt: Mapping[str, Any],
    parameters: Mapping[str, Any],
) -> dict[str, Any]:
    if not contract.is_sql:
        attester = f" (attester: {contract.attester.raw})" if contract.attester else ""
        return _check("provenance", None,
                      f"runtime {contract.runtime or '(none)'} is not SQL bundle-mcp "
                      f"canonicalises; run the bundle's attester{attester}")
    field = next((f for f in contract.receipt if f in SQL_FIELDS or f.endswith("_sql")), None)
    if field is None:
        return _check("provenance", False,
                      "executor.receipt declares no field carrying the executed SQL "
                      f"(one of {', '.join(SQL_FIELDS)} or a name ending in _sql)")
    executed = receipt.get(field)
    if not isinstance(executed, str):
        return _check("provenance", False, f"receipt.{field} is not the executed SQL text")
    if text is None:
        return _check("provenance", False, "no sanctioned computation to compare with")
    assert contract.runtime is not None  # is_sql
    result = compare(text.text, executed, contract.runtime,
                     [p.name for p in contract.parameters], dict(parameters))
    if result.equal:
        return _check("provenance", True, f"receipt.{field} {result.detail}")
    return _check("provenance", False, f"receipt.{field}: {result.detail}")


def _fidelity_check(
    contract: Contract, receipt: Mapping[str, Any], displayed: Any
) -> dict[str, Any]:
    field = next((f for f in contract.receipt if f in RESULT_FIELDS), None)
    if field is None:
        return _check("fidelity", False, "executor.receipt declares no result field "
                      f"(one of {', '.join(RESULT_FIELDS)})")
    if field not in receipt:
        return _check("fidelity", False, f"the receipt has no {field}")
    found, cell = first_cell(receipt[field])
    if not found:
        return _check("fidelity", False, f"receipt.{field} holds no result cell")
    if same_value(displayed, cell):
        return _check("fidelity", True,
                      f"the displayed value equals receipt.{field}'s first cell")
    return _check("fidelity", False, f"the displayed value {_shown(displayed)} differs from "
                  f"receipt.{field}'s first cell {_shown(cell)}")


def first_cell(value: Any) -> tuple[bool, Any]:
    """The first result cell: a scalar itself; a list's first item's first cell; a mapping's
    ``rows`` (if any), else its first value's first cell. ``(False, None)`` when empty."""
    for _ in range(8):  # rows of rows of …: deeper than this is not a result table
        if isinstance(value, list):
            if not value:
                return False, None
            value = value[0]
        elif isinstance(value, dict):
            if not value:
                return False, None
            value = value["rows"] if "rows" in value else next(iter(value.values()))
        else:
            return True, value
    return False, None


def same_value(displayed: Any, cell: Any) -> bool:
    """Numbers (and numeric text) compare by value, exactly (``1234.50`` equals ``1234.5``);
    anything else compares as JSON values."""
    a, b = _number(displayed), _number(cell)
    if a is not None and b is not None:
        return a == b
    if isinstance(displayed, bool) or isinstance(cell, bool):
        return displayed is cell
    return bool(displayed == cell)


def _number(value: Any) -> decimal.Decimal | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return decimal.Decimal(str(value))
    if isinstance(value, str) and value.strip():
        try:
            number = decimal.Decimal(value.strip())
        except decimal.InvalidOperation:
            return None
        return number if number.is_finite() else None
    return None


def _shown(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "…"
