"""The wire contracts: every ``contracts/*.json`` loaded once, validated with our own messages.

The same parsed files are advertised as MCP ``inputSchema``/``outputSchema`` and used to check
requests and results, so what a client is told and what the server enforces cannot drift.
Validation goes through the small :class:`SchemaValidator` protocol; the jsonschema adapter here
is the reference implementation, and a faster library can be swapped in through
``ContractSet(validator_factory=...)`` without touching how violations become diagnostics.
"""

from __future__ import annotations

import copy
import importlib.resources
import json
import logging
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import jsonschema
import referencing
from jsonschema import Draft202012Validator

try:  # the fast path for results; jsonschema stays the authority (see ContractSet._check_internal)
    import jsonschema_rs
except ImportError:  # pragma: no cover - the dependency is declared; a missing wheel only slows
    jsonschema_rs = None

from .errors import (
    ERROR,
    INTERNAL_ERROR,
    INVALID_REQUEST,
    RESOURCE_LIMIT,
    BundleError,
    Diagnostic,
    recovery_step,
    redact,
)

__all__ = [
    "ContractSet",
    "SchemaValidator",
    "Violation",
    "contracts_dir",
    "internal_error",
    "json_path",
]

log = logging.getLogger(__name__)

INPUT_SUFFIX = ".input.schema.json"
OUTPUT_SUFFIX = ".output.schema.json"
ERROR_SCHEMA = "error.schema.json"
MAX_INPUT_DIAGNOSTICS = 8
INTERNAL_MESSAGE = "internal error; see the server log"

# The reference maps exactly these keywords to resource_limit: the caller asked for too much,
# which is a different recovery (narrow the request) from a malformed request.
LIMIT_KEYWORDS = frozenset({"maxLength", "maxItems", "maximum", "maxProperties"})

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_SURROGATE = re.compile("[\ud800-\udfff]")
_MAX_NAME_IN_PATH = 64
_MAX_DETAIL = 1000


def internal_error() -> BundleError:
    """The one envelope a client sees for a bug: the details stay in the server log."""
    return BundleError(INTERNAL_ERROR, INTERNAL_MESSAGE)


# --------------------------------------------------------------------------------------------
# The validator seam


@dataclass(frozen=True, slots=True)
class Violation:
    """One keyword failure, independent of the validation library that found it."""

    path: tuple[str | int, ...]  # where the offending value sits in the instance
    keyword: str  # the failing keyword: "maximum", "required", "additionalProperties", ...
    keyword_value: Any  # that keyword's value in the schema
    schema: Mapping[str, Any]  # the (sub)schema that holds the keyword
    instance: Any  # the offending value (never echoed to the client)
    detail: str  # the library's own wording, for the server log only


class SchemaValidator(Protocol):
    def violations(self, instance: Any) -> Iterator[Violation]: ...


ValidatorFactory = Callable[[Mapping[str, Any]], SchemaValidator]


def _is_strict_integer(_checker: object, instance: object) -> bool:
    # JSON Schema counts 1.0 as an integer; the tools slice and count with these values, so a
    # float would reach them as a float. Accept only real ints (bool is not an int here either).
    return isinstance(instance, int) and not isinstance(instance, bool)


_StrictDraft202012 = jsonschema.validators.extend(
    Draft202012Validator,
    type_checker=Draft202012Validator.TYPE_CHECKER.redefine("integer", _is_strict_integer),
)


class JsonschemaValidator:
    """The reference adapter: ``jsonschema`` Draft 2020-12 with format assertions.

    The registry is explicitly empty, so a ``$ref`` outside the document fails instead of being
    fetched over the network (jsonschema's default registry still retrieves remote refs).
    """

    def __init__(self, schema: Mapping[str, Any]) -> None:
        Draft202012Validator.check_schema(schema)
        self._validator = _StrictDraft202012(
            schema,
            format_checker=Draft202012Validator.FORMAT_CHECKER,
            registry=referencing.Registry(),
        )

    def violations(self, instance: Any) -> Iterator[Violation]:
        for error in self._validator.iter_errors(instance):
            yield Violation(
                path=tuple(error.absolute_path),
                keyword=str(error.validator),
                keyword_value=error.validator_value,
                schema=error.schema if isinstance(error.schema, Mapping) else {},
                instance=error.instance,
                # The message quotes the instance, which may be megabytes: keep the log readable.
                detail=f"{error.json_path}: {error.message}"[:_MAX_DETAIL],
            )


class FastValidator:
    """jsonschema-rs with the same Draft 2020-12 semantics, ~200x faster on large results.

    Used only as a yes/no pre-check of results: a result it accepts is sent; anything it rejects
    is re-checked by the reference adapter, which decides and explains. Requests always go
    through the reference adapter (they are small, and it enforces strict integers).
    """

    def __init__(self, schema: Mapping[str, Any]) -> None:
        self._validator = jsonschema_rs.validator_for(dict(schema))

    def is_valid(self, instance: Any) -> bool:
        return bool(self._validator.is_valid(instance))


# --------------------------------------------------------------------------------------------
# Locating and loading the files


def contracts_dir() -> Path:
    """Where the contract files are: the wheel's package data, else the source checkout.

    The wheel maps ``contracts/`` to the data package ``bundle_mcp.contract_files``; an
    editable install leaves them at the repository root, two levels above this package.
    """
    packaged = importlib.resources.files("bundle_mcp") / "contract_files"
    if packaged.is_dir():
        return Path(str(packaged))
    return Path(__file__).resolve().parents[2] / "contracts"


class ContractSet:
    """Every contract file parsed once; validators compiled on first use and kept.

    Compiling is lazy because ``check_schema`` costs ~15 ms per file and a one-shot
    ``bundle-mcp call`` needs two schemas, not sixteen.
    """

    def __init__(
        self,
        directory: Path | None = None,
        validator_factory: ValidatorFactory = JsonschemaValidator,
        *,
        fast: bool = True,
    ) -> None:
        directory = directory if directory is not None else contracts_dir()
        self._documents: dict[str, Mapping[str, Any]] = {
            path.name: json.loads(path.read_text(encoding="utf-8"))
            for path in sorted(directory.glob("*.json"))
        }
        if not self._documents:
            raise FileNotFoundError(f"no contract files in {directory}")
        self._factory = validator_factory
        self._validators: dict[str, SchemaValidator] = {}
        self._fast: dict[str, FastValidator | None] = {}
        self._use_fast = fast and jsonschema_rs is not None
        self._compile_lock = threading.Lock()

    # -- what is advertised

    def tool_names(self) -> tuple[str, ...]:
        """Tools that have both an input and an output contract, sorted."""
        inputs = {n[: -len(INPUT_SUFFIX)] for n in self._documents if n.endswith(INPUT_SUFFIX)}
        outputs = {n[: -len(OUTPUT_SUFFIX)] for n in self._documents if n.endswith(OUTPUT_SUFFIX)}
        return tuple(sorted(inputs & outputs))

    def input_schema(self, tool: str) -> dict[str, Any]:
        """The parsed input contract, verbatim (a copy: callers may not edit ours)."""
        return copy.deepcopy(dict(self._document(tool + INPUT_SUFFIX)))

    def output_schema(self, tool: str) -> dict[str, Any]:
        return copy.deepcopy(dict(self._document(tool + OUTPUT_SUFFIX)))

    # -- checks

    def check_input(self, tool: str, args: Any) -> None:
        """Raise ``invalid_request`` (``resource_limit`` for a breached maximum) on bad arguments.

        Raises:
            BundleError: with at most 8 ``invalid_input`` diagnostics sorted by (field, code).
        """
        _reject_surrogates(args)
        name = tool + INPUT_SUFFIX
        violations = list(self._validator(name).violations(args))
        if not violations:
            return
        root = self._document(name)
        diagnostics = sorted(
            {d for v in violations for d in _input_diagnostics(v, root)},
            key=lambda d: (d.field or "", d.code, d.message),
        )[:MAX_INPUT_DIAGNOSTICS]
        limited = sorted({json_path(v.path) for v in violations if v.keyword in LIMIT_KEYWORDS})
        if limited:
            raise BundleError(
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
        raise BundleError(
            INVALID_REQUEST,
            f"the arguments do not match the input contract of {tool}",
            tuple(diagnostics),
        )

    def check_output(self, tool: str, result: Any) -> None:
        """Raise ``internal_error`` when a tool's own result breaks its contract (a bug)."""
        self._check_internal(tool + OUTPUT_SUFFIX, result, f"result of {tool}")

    def check_envelope(self, envelope: Any) -> None:
        """Raise ``internal_error`` when an error envelope breaks ``error.schema.json`` (a bug)."""
        self._check_internal(ERROR_SCHEMA, envelope, "error envelope")

    # -- internals

    def _check_internal(self, name: str, instance: Any, what: str) -> None:
        fast = self._fast_validator(name)
        if fast is not None and fast.is_valid(instance):
            return
        first = next(iter(self._validator(name).violations(instance)), None)
        if first is not None:
            log.error("%s breaks %s: %s", what, name, first.detail)
            raise internal_error()

    def _document(self, name: str) -> Mapping[str, Any]:
        try:
            return self._documents[name]
        except KeyError:
            raise KeyError(f"no contract file {name}") from None

    def _fast_validator(self, name: str) -> FastValidator | None:
        if not self._use_fast:
            return None
        if name not in self._fast:
            with self._compile_lock:
                if name not in self._fast:
                    self._fast[name] = FastValidator(self._document(name))
        return self._fast[name]

    def fast_accepts(self, name: str, instance: Any) -> bool | None:
        """The fast validator's verdict on a contract file (``None`` when it is not in use)."""
        fast = self._fast_validator(name)
        return None if fast is None else fast.is_valid(instance)

    def _validator(self, name: str) -> SchemaValidator:
        validator = self._validators.get(name)
        if validator is None:
            with self._compile_lock:
                validator = self._validators.get(name)
                if validator is None:
                    validator = self._factory(self._document(name))
                    self._validators[name] = validator
        return validator


# --------------------------------------------------------------------------------------------
# Violations → invalid_input diagnostics, with our own wording (never jsonschema's, which echoes
# the offending value: a host path or a megabyte string has no place in an envelope).


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


def _reject_surrogates(args: Any) -> None:
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
    description = schema.get("description") if schema else None
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
