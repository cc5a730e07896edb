"""A concept's properties as the format defines them (status, trust tiers, staleness, tags,
text fields) and the concept card every tool reports them in."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..model import Document, thaw
from .temporal import Reference, parse_value

STATUSES = ("draft", "stable", "deprecated")
UNVERIFIED = "unverified"
MACHINE_CONFIRMED = "machine-confirmed"
HUMAN_REVIEWED = "human-reviewed"
# The trust tiers from least to most trusted: "at least this tier" compares positions here.
TRUST_TIERS = (UNVERIFIED, MACHINE_CONFIRMED, HUMAN_REVIEWED)


def scalar_text(value: Any) -> str:
    """The YAML spelling of a JSON-native value, for reporting a malformed field as written."""
    if isinstance(value, str):
        return value
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    import yaml  # only for a list or a mapping written where a scalar belongs: rare

    return yaml.safe_dump(value, default_flow_style=True, sort_keys=False).strip()


def text_field(fm: Mapping[str, Any], key: str) -> str:
    value = fm.get(key)
    return value if isinstance(value, str) else ""


def tags(fm: Mapping[str, Any]) -> list[str]:
    value = fm.get("tags")
    if not isinstance(value, tuple):
        return []
    return [t for t in value if isinstance(t, str)]


def status_state(fm: Mapping[str, Any]) -> dict[str, Any]:
    """Absent ⇒ stable; one of the three names ⇒ itself; else ⇒ invalid (docs/DESIGN.md §8)."""
    if "status" not in fm:
        return {"present": False, "valid": True, "raw": None, "effective": "stable"}
    value = fm["status"]
    raw = scalar_text(thaw(value))
    if isinstance(value, str) and value in STATUSES:
        return {"present": True, "valid": True, "raw": raw, "effective": value}
    return {"present": True, "valid": False, "raw": raw, "effective": None}


def verifications(fm: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """``verified`` as a list: one bare mapping counts as a one-element list."""
    value = fm.get("verified")
    if isinstance(value, Mapping):
        return [value]
    if isinstance(value, tuple):
        return [v for v in value if isinstance(v, Mapping)]
    return []


def trust(fm: Mapping[str, Any]) -> str:
    found = [v.get("by") for v in verifications(fm)]
    actors = [a for a in found if isinstance(a, str) and a]
    if not actors:
        return UNVERIFIED
    if any(a.startswith("human:") for a in actors):
        return HUMAN_REVIEWED
    return MACHINE_CONFIRMED


def stale_after(fm: Mapping[str, Any], profile: str) -> str | None:
    """The raw ``stale_after`` when it is valid for the profile, else ``None``."""
    return valid_stale_after(fm.get("stale_after"), profile)


def valid_stale_after(value: Any, profile: str) -> str | None:
    """:func:`stale_after` of a raw ``stale_after`` value (``None`` when absent)."""
    if isinstance(value, str) and parse_value(value, profile) is not None:
        return value
    return None


def card(doc: Document, ref: Reference) -> dict[str, Any]:
    assert doc.concept_id is not None
    return card_of(doc.concept_id, doc.path, doc.fields, ref)


def card_of(concept_id: str, path: str, fm: Mapping[str, Any], ref: Reference
            ) -> dict[str, Any]:
    """The card of the concept at ``path`` whose frontmatter is ``fm`` (its document's
    ``fields``, or ``Snapshot.fields_of``: no document need be built for a card)."""
    state = status_state(fm)
    after = stale_after(fm, ref.profile)
    return {
        "id": concept_id,
        "path": path,
        "type": text_field(fm, "type"),
        "title": text_field(fm, "title"),
        "description": text_field(fm, "description"),
        "tags": tags(fm),
        "status": state["effective"],
        "status_state": state,
        "trust": trust(fm),
        "stale": ref.stale(after),
        "stale_after": after,
    }
