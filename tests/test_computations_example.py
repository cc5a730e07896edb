"""The example bundle's attested computation, end to end, and the receipt in
docs/COMPUTATIONS.md.

An executor is played here by Python's sqlite3: it takes the text get_computation returns, binds
the parameter as a named query parameter and runs it on a small ledger. check_receipt must attest
that run, and the receipt printed in the docs, and must fail the classic ways of cheating.
"""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from bundle_mcp.dispatch import Dispatcher, ServeConfig

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "coffee-roastery"
DOC = REPO / "docs" / "COMPUTATIONS.md"
CONCEPT = "reports/green-on-hand"
AS_OF = "2026-12-02"


@pytest.fixture(scope="module")
def dispatcher() -> Dispatcher:
    return Dispatcher(ServeConfig(bundles=(str(EXAMPLE),)))


def call(dispatcher: Dispatcher, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    outcome = dispatcher.call(tool, arguments)
    assert not outcome.is_error, outcome.structured
    return outcome.structured


def ledger() -> sqlite3.Connection:
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE inventory_movements (lot_id TEXT, kg_in REAL, kg_out REAL, "
               "reason TEXT)")
    db.executemany(
        "INSERT INTO inventory_movements VALUES (?, ?, ?, ?)",
        [("RC-2026-014", 600.0, 0.0, "received"), ("RC-2026-014", 0.0, 180.0, "roasted"),
         ("RC-2026-014", 0.0, 7.5, "samples"), ("RC-2026-009", 420.0, 0.0, "received")],
    )
    return db


def test_a_real_run_of_the_example_computation_attests(dispatcher: Dispatcher) -> None:
    got = call(dispatcher, "get_computation", {"concept_id": CONCEPT, "as_of": AS_OF})
    assert got["attestable"] and got["freshness"]["gate"] == "ok"
    text = got["computation"]["text"]
    params = {"lot_id": "RC-2026-014"}
    (value,) = ledger().execute(text, params).fetchone()
    assert value == 412.5
    receipt = {"run_id": "test-run", "executed_sql": text, "result": [[value]]}
    checked = call(dispatcher, "check_receipt", {
        "concept_id": CONCEPT, "parameters": params, "receipt": receipt,
        "displayed_value": value, "as_of": AS_OF,
    })
    assert checked["verdict"] == "attested", checked["reasons"]
    assert checked["computation_sha256"] == got["computation"]["sha256"]


def test_the_receipt_in_the_docs_attests(dispatcher: Dispatcher) -> None:
    block = re.search(r"```json receipt\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    assert block is not None, "docs/COMPUTATIONS.md lost its receipt block"
    arguments = json.loads(block[1])
    checked = call(dispatcher, "check_receipt", arguments)
    assert checked["verdict"] == "attested", checked["reasons"]
    shown = re.search(r'"verdict": "attested",\s*"reasons": \[\],\s*"checks": (\[.*?\])\n\}',
                      DOC.read_text(encoding="utf-8"), re.S)
    assert shown is not None
    assert json.loads(shown[1]) == checked["checks"], "the checks printed in the docs drifted"


@pytest.mark.parametrize(
    ("cheat", "failed"),
    [
        (lambda sql: sql.replace(":lot_id", "'RC-2026-014'"), "provenance"),
        (lambda sql: sql.replace(" - SUM(kg_out)", ""), "provenance"),
        (lambda sql: sql.replace("inventory_movements", "inventory_movements_old"),
         "provenance"),
    ],
    ids=["literal", "dropped-term", "other-table"],
)
def test_a_cheating_run_fails(dispatcher: Dispatcher, cheat: Any, failed: str) -> None:
    got = call(dispatcher, "get_computation", {"concept_id": CONCEPT, "as_of": AS_OF})
    sql = cheat(got["computation"]["text"])
    db = ledger()
    params = {"lot_id": "RC-2026-014"}
    try:
        row = db.execute(sql, params).fetchone() if ":lot_id" in sql else db.execute(
            sql.replace("inventory_movements_old", "inventory_movements")).fetchone()
    except sqlite3.Error:
        row = (0,)
    checked = call(dispatcher, "check_receipt", {
        "concept_id": CONCEPT, "parameters": params,
        "receipt": {"run_id": "x", "executed_sql": sql, "result": [list(row)]},
        "displayed_value": row[0], "as_of": AS_OF,
    })
    assert checked["verdict"] == "failed"
    assert [c["check"] for c in checked["checks"] if c["ok"] is False] == [failed]


def test_the_python_computation_is_unattested_and_names_its_attester(
    dispatcher: Dispatcher,
) -> None:
    got = call(dispatcher, "get_computation", {"concept_id": "pricing/landed-cost",
                                               "as_of": AS_OF})
    assert (got["computation"]["source"], got["computation"]["path"]) == (
        "file", "pricing/landed_cost.py")
    assert not got["attestable"]
    params = {"green_price_usd_per_lb": 2.9, "freight_usd_per_kg": 0.35,
              "fees_usd_per_kg": 0.2, "warehouse_usd_per_kg": 0.18, "roast_loss_percent": 15,
              "sorting_loss_percent": 1}
    checked = call(dispatcher, "check_receipt", {
        "concept_id": "pricing/landed-cost", "parameters": params,
        "receipt": {"run_id": "r1", "code_sha256": got["computation"]["sha256"],
                    "result": 8.47},
        "displayed_value": 8.47, "as_of": AS_OF,
    })
    assert checked["verdict"] == "unattested"
    assert checked["attester_resource"]["kind"] == "url"
