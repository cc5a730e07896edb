"""What ``tools/list`` advertises, derived from the contract files: the input contract trimmed
for a model's budget (never stricter than the file), and the output contract OR the error
envelope, without annotations (exactly as strict as the files, in fewer bytes)."""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["ANNOTATIONS", "ENVELOPE_DEF_PREFIX", "FOLD_KEY", "HINT_KEY", "ON_ERROR",
           "advertised_input_schema", "advertised_output_schema"]

# The advertised input schema

# Two annotations of our own in the input contracts; validators ignore them (2020-12 treats
# unknown keywords as annotations) and neither is ever advertised.
# - x-hint: the sentence an invalid_input diagnostic adds about a value (instead of its shorter
#   description), so a long explanation reaches a model only when it got the value wrong.
# - x-fold: this subschema is advertised looser, for the size of tools/list: true keeps only its
#   type and description; a list of applicator keywords drops those. Folding only relaxes (the
#   advertised schema accepts all the contract accepts), and the server checks the whole file.
HINT_KEY = "x-hint"
FOLD_KEY = "x-fold"
_FOLDABLE = frozenset({"allOf", "anyOf", "oneOf", "not", "if", "then", "else"})
# The file's header: the Tool's own name, title and description say what it names, and MCP
# (2025-11-25) reads a tool schema without "$schema" as 2020-12, the dialect of every contract.
_HEADER = ("$schema", "$id", "title", "description")
_SCHEMA_MAPS = frozenset({"properties", "patternProperties", "$defs", "dependentSchemas"})
_SCHEMA_LISTS = frozenset({"allOf", "anyOf", "oneOf", "prefixItems"})
_VALUE_KEYWORDS = frozenset({"enum", "const", "default", "examples"})
_UNEVALUATED = frozenset({"unevaluatedProperties", "unevaluatedItems"})


def advertised_input_schema(contract: Mapping[str, Any]) -> dict[str, Any]:
    """The input contract without its header, ``x-hint`` and folded parts, and unused ``$defs``.

    Every other keyword is the file's, so what a client validates against is the contract or,
    where a part is folded, a relaxation of it: never stricter than what the server enforces.

    Raises:
        ValueError: for an ``x-fold`` that would not be a relaxation (a keyword outside the
            applicators, or ``unevaluated*`` in the same document).
    """
    seen: set[str] = set()
    trimmed: dict[str, Any] = _trim(contract, seen)  # a mapping trims to a dict
    if FOLD_KEY in seen and seen & _UNEVALUATED:
        # Dropping a subschema changes what counts as evaluated: no longer only a relaxation.
        raise ValueError("x-fold cannot be used next to unevaluated* keywords")
    for key in _HEADER:
        trimmed.pop(key, None)
    defs = trimmed.pop("$defs", None)
    if defs:
        used = _used_definitions(trimmed, defs)
        defs = {name: defs[name] for name in defs if name in used}
        trimmed = _inline_single_uses(trimmed, defs)
        if defs:
            trimmed["$defs"] = defs
    return trimmed


def _trim(node: Any, seen: set[str]) -> Any:
    if not isinstance(node, Mapping):
        return copy.deepcopy(node)  # a boolean schema
    seen.update(key for key in (FOLD_KEY, *_UNEVALUATED) if key in node)
    fold = node.get(FOLD_KEY)
    if fold is True:  # its type (if it says one) is implied by the whole: still a relaxation
        return {key: copy.deepcopy(node[key]) for key in ("type", "description") if key in node}
    dropped = set(fold) if isinstance(fold, list) else set()
    if fold is not None and (not isinstance(fold, list) or not dropped <= _FOLDABLE):
        raise ValueError(f"x-fold must be true or a list of {sorted(_FOLDABLE)}")
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in (HINT_KEY, FOLD_KEY) or key in dropped:
            continue
        if key in _VALUE_KEYWORDS:
            out[key] = copy.deepcopy(value)
        elif key in _SCHEMA_MAPS and isinstance(value, Mapping):
            out[key] = {name: _trim(schema, seen) for name, schema in value.items()}
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            out[key] = [_trim(schema, seen) for schema in value]
        elif isinstance(value, Mapping):  # items, not, if/then/else, propertyNames, ...
            out[key] = _trim(value, seen)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _used_definitions(root: Mapping[str, Any], defs: Mapping[str, Any]) -> set[str]:
    """The ``$defs`` reachable from the root through local refs (folding may orphan some)."""
    used: set[str] = set()
    pending = [root]
    while pending:
        for ref in _local_refs(pending.pop()):
            name = ref.removeprefix("#/$defs/")
            if name != ref and name in defs and name not in used:
                used.add(name)
                pending.append(defs[name])
    return used


def _inline_single_uses(root: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """Write each definition used once where it is used: the same schema in fewer bytes.

    Only a use that is ``{"$ref": ...}`` alone or with a ``description`` (which then wins) is
    replaced; the definitions hold no ``$id`` or anchors, so their refs mean the same anywhere.
    Edits ``defs`` in place (inlined names are removed) and returns the new root.
    """
    inlined = True
    while inlined:
        inlined = False
        uses: dict[str, int] = {}
        for node in (root, *defs.values()):
            for ref in _local_refs(node):
                name = ref.removeprefix("#/$defs/")
                uses[name] = uses.get(name, 0) + 1
        for name, schema in list(defs.items()):
            if uses.get(name) != 1 or f"#/$defs/{name}" in set(_local_refs(schema)):
                continue
            root, inlined = _replace_ref(root, name, schema)
            for other in [n for n in defs if n != name and not inlined]:
                defs[other], inlined = _replace_ref(defs[other], name, schema)
            if inlined:
                del defs[name]
                break  # counts changed: count again
    return root


def _replace_ref(node: Any, name: str, schema: Any) -> tuple[Any, bool]:
    """``node`` with its inlinable ``{"$ref": "#/$defs/<name>"}`` written out, and whether."""
    if isinstance(node, list):
        items, done = [], False
        for item in node:
            if not done:
                item, done = _replace_ref(item, name, schema)
            items.append(item)
        return items, done
    if not isinstance(node, dict):
        return node, False
    if node.get("$ref") == f"#/$defs/{name}" and set(node) <= {"$ref", "description"}:
        written = copy.deepcopy(schema)
        if "description" in node:
            written["description"] = node["description"]
        return written, True
    out: dict[str, Any] = {}
    done = False
    for key, value in node.items():
        if not done and key not in _VALUE_KEYWORDS:
            value, done = _replace_ref(value, name, schema)
        out[key] = value
    return out, done


def _local_refs(node: Any) -> Iterator[str]:
    if isinstance(node, Mapping):
        ref = node.get("$ref")
        if isinstance(ref, str):
            yield ref
        for key, value in node.items():
            if key not in _VALUE_KEYWORDS:
                yield from _local_refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from _local_refs(item)


# --------------------------------------------------------------------------------------------
# The advertised output schema

# The envelope's own definitions are renamed with this prefix in the advertised document, so they
# cannot collide with a tool's (several tools define their own "diagnostic").
ENVELOPE_DEF_PREFIX = "envelope_"
ON_ERROR = (
    "On a failed call (isError: true) structuredContent is the error envelope instead: the "
    "second branch of anyOf."
)
# Keywords that no validator asserts: 2020-12's meta-data vocabulary and $comment. A client
# compiles every outputSchema before its first call (the TypeScript SDK: Ajv, with its event
# loop held), so the advertised output schemas leave them out: about 40% of the bytes, and
# nothing of what is accepted. The contract files keep them, for people and the OpenAPI document.
ANNOTATIONS = frozenset(
    {"title", "description", "default", "examples", "deprecated", "readOnly", "writeOnly",
     "$comment"}
)
# Where a 2020-12 schema holds subschemas (with _SCHEMA_MAPS and _SCHEMA_LISTS): any other
# keyword's value is data (a property name under "required" or "dependentRequired" may well be
# "title"), copied as it is.
_SUBSCHEMA = frozenset(
    {"items", "additionalProperties", "unevaluatedProperties", "unevaluatedItems", "contains",
     "propertyNames", "not", "if", "then", "else", "contentSchema"}
)


def advertised_output_schema(
    result: Mapping[str, Any], envelope: Mapping[str, Any]
) -> dict[str, Any]:
    """One self-contained 2020-12 document: ``{"type": "object", "anyOf": [result, envelope]}``.

    Each branch is its contract file without ``$schema``/``$id``/``$defs`` and without the
    annotation keywords of :data:`ANNOTATIONS` (at schema positions only); every other keyword
    is the file's, so the document accepts exactly what one of the two files accepts. The
    definitions of both are merged into the root ``$defs``, the envelope's renamed with
    :data:`ENVELOPE_DEF_PREFIX` (and its ``$ref``s with them). Only local ``#/$defs/`` refs are
    used, so any validator resolves them without a registry. The root says only what neither
    file says (:data:`ON_ERROR`); the tool's own title and description name the result. There
    is no ``$id``: the document is neither contract file, and a client that caches validators
    by ``$id`` (the TypeScript SDK's Ajv) must not mistake one for the other. The dispatcher
    still checks a result against the output contract alone and an envelope against
    ``error.schema.json`` alone, annotations and all.

    Raises:
        ValueError: when the envelope uses a ``$ref`` other than ``#/$defs/<name>``, or a renamed
            definition would collide with one of the tool's.
    """
    success = dict(result)
    failure = dict(envelope)
    header = {key: success.pop(key) for key in _HEADER if key in success}
    defs: dict[str, Any] = {
        name: _without_annotations(schema) for name, schema in success.pop("$defs", {}).items()
    }
    envelope_defs: dict[str, Any] = dict(failure.pop("$defs", {}))
    for key in ("$schema", "$id"):
        failure.pop(key, None)
    renamed = {name: ENVELOPE_DEF_PREFIX + name for name in envelope_defs}
    clashes = sorted(set(renamed.values()) & set(defs))
    if clashes:
        raise ValueError(f"envelope definitions clash with the tool's: {', '.join(clashes)}")
    for name, schema in envelope_defs.items():
        defs[renamed[name]] = _rename_refs(_without_annotations(schema), renamed)
    advertised: dict[str, Any] = {}
    if "$schema" in header:
        advertised["$schema"] = header["$schema"]
    advertised["description"] = ON_ERROR
    advertised["type"] = "object"  # MCP requires an object root
    advertised["anyOf"] = [
        _without_annotations(success),
        _rename_refs(_without_annotations(failure), renamed),
    ]
    if defs:
        advertised["$defs"] = defs
    return advertised


def _without_annotations(node: Any) -> Any:
    """A copy of the schema ``node`` without the keywords of :data:`ANNOTATIONS`."""
    if not isinstance(node, Mapping):
        return copy.deepcopy(node)  # a boolean schema
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in ANNOTATIONS:
            continue
        if key in _SCHEMA_MAPS and isinstance(value, Mapping):
            out[key] = {name: _without_annotations(schema) for name, schema in value.items()}
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            out[key] = [_without_annotations(schema) for schema in value]
        elif key in _SUBSCHEMA:
            out[key] = _without_annotations(value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _rename_refs(node: Any, renamed: Mapping[str, str]) -> Any:
    if isinstance(node, list):
        return [_rename_refs(item, renamed) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: _rename_refs(value, renamed) for key, value in node.items()}
    ref = node.get("$ref")
    if isinstance(ref, str):
        name = ref.removeprefix("#/$defs/")
        if name == ref or name not in renamed:
            raise ValueError(f"the error envelope's $ref {ref} is not one of its own $defs")
        out["$ref"] = "#/$defs/" + renamed[name]
    return out
