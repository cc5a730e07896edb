"""The bundle's OKF version: the root ``index.md`` declaration and how it is resolved.

An undeclared bundle is read as 0.1 (``default`` resolution, ``legacy`` compatibility), the
reference's rule, so its v0.1 fallbacks (``timestamp``, ``# Citations``) apply. A declared version
newer than 0.2 is read as 0.2 best-effort. The validator holds a rule that only 0.1 has more
loosely for a ``default`` 0.1 than for a declared one (``validation.findings.VersionRules``).
"""

from __future__ import annotations

from typing import Any

from ..model import Snapshot, thaw
from .properties import scalar_text

KNOWN_VERSIONS = ("0.1", "0.2")
LATEST = "0.2"


def version_declaration(snapshot: Snapshot) -> dict[str, Any]:
    index = snapshot.root_index
    fm = index.frontmatter if index is not None else None
    if fm is None or "okf_version" not in fm:
        return {"present": False, "valid": False, "raw": None, "value": None}
    raw = fm["okf_version"]
    raw_text = scalar_text(thaw(raw))
    valid = isinstance(raw, str) and raw in KNOWN_VERSIONS
    return {"present": True, "valid": valid, "raw": raw_text, "value": raw if valid else None}


def resolve_version(snapshot: Snapshot, target: str = "auto") -> dict[str, Any]:
    declaration = version_declaration(snapshot)
    declared = declaration["raw"] if declaration["present"] else None
    if target in KNOWN_VERSIONS:
        effective, resolution = target, "explicit"
    elif declaration["valid"]:
        effective, resolution = declaration["value"], "declared"
    elif declared is not None and _is_future(declared):
        effective, resolution = LATEST, "future-best-effort"
    else:
        effective, resolution = "0.1", "default"
    if resolution == "future-best-effort":
        compatibility = "best-effort"
    elif effective == "0.1":
        compatibility = "legacy"
    else:
        compatibility = "native"
    return {
        "declared": declared,
        "effective": effective,
        "resolution": resolution,
        "compatibility": compatibility,
    }


def _is_future(raw: str) -> bool:
    parts = raw.split(".")
    if len(parts) != 2 or not all(p.isdigit() for p in parts):
        return False
    return (int(parts[0]), int(parts[1])) > (0, 2)
