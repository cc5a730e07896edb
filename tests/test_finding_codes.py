"""The table of finding codes (``bundle_mcp.validation.codes``) is complete and only that.

Every code the loader and the validators can put on a finding is found by reading their source
(the ``error``/``warn``/``info`` helpers, ``Diagnostic(code=...)``, the capture walk's ``_skip``,
``FrontmatterError`` and ``PENDING_WRITE``); the table must list exactly those, each with
real texts, since ``--format sarif`` turns them into code-scanning rules.
"""

from __future__ import annotations

import ast
from pathlib import Path

from bundle_mcp.errors import ERROR, INFO, WARN
from bundle_mcp.loader import PENDING_WRITE
from bundle_mcp.validation.codes import FINDING_CODES, describe

SRC = Path(__file__).resolve().parent.parent / "src" / "bundle_mcp"
SCANNED = [
    *sorted((SRC / "loader").glob("*.py")),
    *sorted((SRC / "okf").glob("*.py")),
    *sorted((SRC / "validation").glob("*.py")),
]
# Codes of request diagnostics inside an error envelope (a bad bundle_path), never findings.
ENVELOPE_ONLY = {"invalid_input", "recovery_step"}
# An Attested Computation whose text cannot be determined is reported with the exception's code.
HELPERS = {"error": 1, "warn": 1, "info": 1, "_skip": 0, "FrontmatterError": 0,
           "ComputationUnavailable": 0}


def _name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def emitted_codes() -> set[str]:
    found: set[str] = set()
    for path in SCANNED:
        if path.name == "codes.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            name = _name(node.func)
            position = HELPERS.get(name or "")
            if position is not None and len(node.args) > position:
                arg = node.args[position]
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    found.add(arg.value)
            if name == "Diagnostic":
                for kw in node.keywords:
                    if kw.arg == "code" and isinstance(kw.value, ast.Constant):
                        found.add(str(kw.value.value))
    found.add(PENDING_WRITE)
    return found - ENVELOPE_ONLY


def test_the_scan_sees_codes_from_every_kind_of_emitter() -> None:
    codes = emitted_codes()
    for code in ("missing_type", "orphan", "broken_link", "symlink_skipped", "unreadable_entry",
                 "invalid_relation", "unterminated_frontmatter", "invalid_concept_id",
                 "pending_write_unresolved", "log_order", "mixed_temporal_kinds"):
        assert code in codes, code


def test_the_table_lists_exactly_the_codes_that_can_be_emitted() -> None:
    codes = emitted_codes()
    assert sorted(codes - set(FINDING_CODES)) == [], "add these to validation/codes.py"
    assert sorted(set(FINDING_CODES) - codes) == [], "these are never emitted"


def test_every_entry_has_real_texts() -> None:
    for code, entry in FINDING_CODES.items():
        assert entry.severity in (ERROR, WARN, INFO), code
        for text in (entry.short, entry.full, entry.help):
            assert text.strip() == text and text.endswith("."), (code, text)
            assert "\n" not in text, (code, text)
            if "_" in code:  # says what it means, not its own identifier
                assert code not in text, (code, text)
        assert len(entry.short) <= 80, code
        assert len(entry.full) > len(entry.short), code
        assert entry.help != entry.short, code


def test_an_unknown_code_still_gets_texts() -> None:
    entry = describe("some_future_code", WARN)
    assert (entry.severity, entry.short) == (WARN, "okf some future code.")
    assert describe("orphan", INFO) is FINDING_CODES["orphan"]
