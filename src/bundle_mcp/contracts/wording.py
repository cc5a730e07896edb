"""Violations of an input contract in our own words: ``invalid_input`` diagnostics and the
``invalid_request`` or ``resource_limit`` error they make (never jsonschema's wording, which
echoes the offending value: a host path or a megabyte string has no place in an envelope)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from ..errors import (
    ERROR,
    INTERNAL_ERROR,
    INVALID_REQUEST,
    RESOURCE_LIMIT,
    BundleError,
    Diagnostic,
    recovery_step,
    redact,
)
from .advertise import HINT_KEY
from .validators import Violation

__all__ = ["INTERNAL_MESSAGE", "LIMIT_KEYWORDS", "MAX_INPUT_DIAGNOSTICS", "input_error",
           "internal_error", "json_path", "reject_surrogates"]

MAX_INPUT_DIAGNOSTICS = 8
INTERNAL_MESSAGE = "internal error; see the server log"

# The reference maps exactly these keywords to resource_limit: the caller asked for too much,
# which is a different recovery (narrow the request) from a malformed request.
LIMIT_KEYWORDS = frozenset({"maxLength", "maxItems", "maximum", "maxProperties"})

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_SURROGATE = re.compile("[\ud800-\udfff]")
_MAX_NAME_IN_PATH = 64


def internal_error() -> BundleError:
    """The one envelope a client sees for a bug: the details stay in the server log."""
    return BundleError(INTERNAL_ERROR, INTERNAL_MESSAGE)


def input_error(tool: str, violations: Sequence[Violation], root: Mapping[str, Any]) -> BundleError:
    """The error for arguments that break ``tool``'s input contract ``root``: ``resource_limit``
    when a limit keyword failed, else ``invalid_request``; at most
    :data:`MAX_INPUT_DIAGNOSTICS` ``invalid_input`` diagnostics sorted by (field, code)."""
    diagnostics = sorted(
        {d for v in violations for d in _input_diagnostics(v, root)},
        key=lambda d: (d.field or "", d.code, d.message),
    )[:MAX_INPUT_DIAGNOSTICS]
    limited = sorted({json_path(v.path) for v in violations if v.keyword in LIMIT_KEYWORDS})
    if limited:
        return BundleError(
            RESOURCE_LIMIT,
            f"the arguments of {tool} exceed a limit of its input contract",
            (
                *diagnostics,
                recovery_step(
                    f"stay within the limits in the input schema of {tool} "
                    f"({', '.join(limited[:MAX_INPUT_DIAGNOSTICS])}); narrow the request "
                    "instead of asking for more"
                ),
            ),
        )
    return BundleError(
        INVALID_REQUEST,
        f"the arguments do not match the input contract of {tool}",
        tuple(diagnostics),
    )


def json_path(path: Iterable[str | int]) -> str:
    """``("kinds", 0)`` → ``$.kinds[0]``; odd property names are quoted: ``$["a b"]``."""
    out = ["$"]
    for part in path:
        if isinstance(part, int):
            out.append(f"[{part}]")
            continue
        if _SURROGATE.search(part):
            part = part.encode("utf-8", "backslashreplace").decode("utf-8")
        if _IDENTIFIER.match(part) and len(part) <= _MAX_NAME_IN_PATH:
            out.append(f".{part}")
        else:
            shown = part if len(part) <= _MAX_NAME_IN_PATH else part[:_MAX_NAME_IN_PATH] + "…"
            out.append(f"[{json.dumps(shown, ensure_ascii=False)}]")
    return "".join(out)


def reject_surrogates(args: Any) -> None:
    """Refuse text that is valid JSON but not Unicode: a lone UTF-16 surrogate (``"\\ud800"``).

    JSON Schema cannot express this, and such a string echoed into a reply cannot be encoded
    as UTF-8: the SDK's stdio writer then fails and the whole session closes.
    """
    paths = sorted({json_path(p) for p in _surrogate_paths(args, ())})
    if paths:
        raise BundleError(
            INVALID_REQUEST,
            "the arguments contain text that is not valid Unicode",
            tuple(
                Diagnostic(
                    code="invalid_input",
                    severity=ERROR,
                    field=path,
                    message=f"{path} contains an unpaired UTF-16 surrogate; send valid Unicode.",
                )
                for path in paths[:MAX_INPUT_DIAGNOSTICS]
            ),
        )


def _surrogate_paths(value: Any, path: tuple[str | int, ...]) -> Iterator[tuple[str | int, ...]]:
    if isinstance(value, str):
        if _SURROGATE.search(value):
            yield path
    elif isinstance(value, Mapping):
        for key, item in value.items():
            if isinstance(key, str) and _SURROGATE.search(key):
                yield (*path, key)
            yield from _surrogate_paths(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _surrogate_paths(item, (*path, index))


def _input_diagnostics(v: Violation, root: Mapping[str, Any]) -> Iterator[Diagnostic]:
    if v.keyword == "required" and isinstance(v.instance, Mapping):
        for name in v.keyword_value:
            if name not in v.instance:
                prop = _property_schema(v.schema, name, root)
                yield _diagnostic((*v.path, name), "is required", prop)
        return
    if v.keyword in ("additionalProperties", "unevaluatedProperties") and isinstance(
        v.instance, Mapping
    ):
        known = sorted(v.schema.get("properties", {}))
        hint = f"Known arguments: {', '.join(known)}." if known else ""
        for name in _unknown_properties(v.instance, v.schema):
            yield _diagnostic((*v.path, name), "is not an argument of this tool", None, hint)
        return
    yield _diagnostic(v.path, _problem(v), v.schema)


def _diagnostic(
    path: tuple[str | int, ...],
    problem: str,
    schema: Mapping[str, Any] | None,
    hint: str = "",
) -> Diagnostic:
    field = json_path(path)
    subject = field[2:] if field.startswith("$.") else field
    if field == "$":
        subject = "the arguments"
    # x-hint, when present (even empty), speaks for the value instead of its description.
    description = schema.get(HINT_KEY, schema.get("description")) if schema else None
    # A description that names an example path would get the whole message withheld.
    if not hint and isinstance(description, str) and redact(description) == description:
        hint = description
    message = f"{subject} {problem}." + (f" {hint}" if hint else "")
    return Diagnostic(code="invalid_input", severity=ERROR, field=field, message=message)


def _unknown_properties(instance: Mapping[str, Any], schema: Mapping[str, Any]) -> list[str]:
    properties = schema.get("properties", {})
    patterns = [re.compile(p) for p in schema.get("patternProperties", {})]
    return sorted(
        name
        for name in instance
        if name not in properties and not any(p.search(name) for p in patterns)
    )


def _property_schema(
    parent: Mapping[str, Any], name: str, root: Mapping[str, Any]
) -> Mapping[str, Any] | None:
    prop = parent.get("properties", {}).get(name)
    if isinstance(prop, Mapping) and isinstance(prop.get("$ref"), str):
        return _local_ref(prop["$ref"], root) or prop
    return prop if isinstance(prop, Mapping) else None


def _local_ref(ref: str, root: Mapping[str, Any]) -> Mapping[str, Any] | None:
    if not ref.startswith("#/"):
        return None
    node: Any = root
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node if isinstance(node, Mapping) else None


_TYPE_WORDS = {
    "integer": "an integer",
    "number": "a number",
    "string": "a string",
    "boolean": "true or false",
    "object": "an object",
    "array": "an array",
    "null": "null",
}


def _choices(values: Any) -> str:
    shown = [json.dumps(x, ensure_ascii=False) for x in list(values)[:12]]
    return ", ".join(shown) + (", ..." if len(values) > 12 else "")


def _problem(v: Violation) -> str:
    """The failure in words, naming the schema's bound but never the caller's value."""
    k, bound = v.keyword, v.keyword_value
    if k == "type":
        kinds = bound if isinstance(bound, list) else [bound]
        return "must be " + " or ".join(_TYPE_WORDS.get(t, str(t)) for t in kinds)
    if k == "maxLength":
        return f"is longer than {bound} characters"
    if k == "minLength":
        return "must not be empty" if bound == 1 else f"is shorter than {bound} characters"
    if k == "maximum":
        return f"is greater than the maximum {bound}"
    if k == "minimum":
        return f"is less than the minimum {bound}"
    if k == "exclusiveMaximum":
        return f"must be less than {bound}"
    if k == "exclusiveMinimum":
        return f"must be greater than {bound}"
    if k == "maxItems":
        return f"has more than {bound} items"
    if k == "minItems":
        return f"has fewer than {bound} items"
    if k == "maxProperties":
        return f"has more than {bound} properties"
    if k == "minProperties":
        return f"has fewer than {bound} properties"
    if k == "uniqueItems":
        return "must not repeat an item"
    if k == "enum":
        return f"must be one of {_choices(bound)}"
    if k == "const":
        return f"must be {json.dumps(bound, ensure_ascii=False)}"
    if k == "pattern":
        # bundle_path's description names an example host path and is withheld; say it here.
        return "must be an absolute path" if bound == "^/" else "does not have the required form"
    if k == "format":
        return f"is not a valid {bound}"
    if k in ("oneOf", "anyOf"):
        return "matches none of the allowed forms"
    if k == "not":
        return "has a form that is not allowed"
    return f"does not satisfy the '{k}' rule of the input contract"
