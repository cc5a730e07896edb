"""The bundle's own attester for report computations (OKF v0.2 §10.2): deterministic, no LLM.

Usage: python sql_equality.py SANCTIONED.sql RECEIPT.json DISPLAYED_VALUE
Prints "attested" or "failed: <reason>". Consumers that cannot run it can ask bundle-mcp's
check_receipt tool, which makes the same comparison.
"""

import json
import re
import sys


def canonical(sql: str) -> str:
    """Comments and white space dropped, case folded outside quoted text."""
    parts = re.split(r"('(?:[^']|'')*')", sql)
    out = []
    for n, part in enumerate(parts):
        if n % 2:  # a string literal: kept exactly
            out.append(part)
            continue
        part = re.sub(r"--[^\n]*", " ", part)
        part = re.sub(r"/\*.*?\*/", " ", part, flags=re.S)
        out.append(" ".join(part.split()).upper())
    return " ".join(p for p in out if p).rstrip(";").strip()


def main(sanctioned_path: str, receipt_path: str, displayed: str) -> str:
    with open(sanctioned_path, encoding="utf-8") as f:
        sanctioned = f.read()
    with open(receipt_path, encoding="utf-8") as f:
        receipt = json.load(f)
    if canonical(receipt["executed_sql"]) != canonical(sanctioned):
        return "failed: the executed SQL is not the sanctioned computation"
    cell = receipt["result"][0][0]
    if float(displayed) != float(cell):
        return "failed: the displayed value is not the receipt's result"
    return "attested"


if __name__ == "__main__":
    print(main(*sys.argv[1:4]))
