"""The wire contracts: every ``contracts/*.json`` loaded once, validated with our own messages.

The same parsed files are advertised over MCP and used to check requests and results, so what
a client is told and what the server enforces cannot drift: ``inputSchema`` is
:func:`advertised_input_schema`, the input contract trimmed for a model's budget (never stricter
than the file), and ``outputSchema`` is :func:`advertised_output_schema`, the output contract
OR the error envelope, so that a failed call's ``structuredContent`` is valid too (clients that
check it on errors, like the TypeScript SDK, would otherwise drop the message), both without
their annotations (exactly as strict as the files, in fewer bytes). Validation goes
through the small :class:`SchemaValidator` protocol; the jsonschema adapter here is the
reference implementation, and a faster library can be swapped in through
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
    # mypy has no "module or None" type for an optional import; users check `is not None`.
    jsonschema_rs = None  # type: ignore[assignment]

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
from .limits import DEFAULT_CAPS, Caps

__all__ = [
    "ContractSet",
    "advertised_input_schema",
    "advertised_output_schema",
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


# The contract bounds that are the loader's file cap (limits.Caps.max_files): lists with at
# most one item per Markdown file or concept of the bundle. They hold the default cap in the
# files, and ContractSet puts the configured cap there, so what is advertised and enforced
# follows --max-files. Every other 10000 of the contracts bounds something else and stays
# (docs/DECISIONS.md, 2026-12-03, lists them): a concept's own lists (read_concept's
# projections, MAX_PROJECTED_ITEMS), diagnostics, blockers, references and date mappings.
# tests/test_caps.py checks that each pointer holds the default cap in its file.
FILE_CAP_BOUNDS: tuple[tuple[str, str], ...] = (
    ("list_concepts.output.schema.json", "/properties/concepts/maxItems"),
    ("get_computation.output.schema.json", "/properties/used_by/maxItems"),
    ("apply_concept_patch.output.schema.json", "/properties/changed_paths/maxItems"),
    ("apply_bundle_edit.output.schema.json", "/properties/changed_paths/maxItems"),
    ("preview_bundle_edit.output.schema.json", "/properties/files/maxItems"),
    ("apply_v02_migration.output.schema.json", "/properties/changed_paths/maxItems"),
    ("preview_concept_patch.output.schema.json", "/properties/affected_paths/maxItems"),
    ("preview_v02_migration.output.schema.json", "/properties/affected_paths/maxItems"),
    ("preview_v02_migration.input.schema.json", "/properties/generated_at/maxItems"),
    ("apply_v02_migration.input.schema.json", "/properties/generated_at/maxItems"),
    *(
        (file, f"/$defs/plan_proof/properties/{field}/maxItems")
        for file in ("preview_v02_migration.output.schema.json",
                     "apply_v02_migration.input.schema.json")
        for field in ("reads", "writes", "deletes", "renames", "changed_files")
    ),
)


def _with_caps(documents: dict[str, Any], caps: Caps) -> None:
    """Put ``caps.max_files`` at every :data:`FILE_CAP_BOUNDS` pointer of ``documents``."""
    for file, pointer in FILE_CAP_BOUNDS:
        *parents, key = pointer.lstrip("/").split("/")
        node = documents[file]
        for part in parents:
            node = node[part]
        if node[key] != DEFAULT_CAPS.max_files:
            raise ValueError(f"{file}{pointer} is not the file cap {DEFAULT_CAPS.max_files}")
        node[key] = caps.max_files


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


# types-jsonschema leaves validators.extend unannotated (it returns a validator class).
_StrictDraft202012 = jsonschema.validators.extend(  # type: ignore[no-untyped-call]
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
    ``bundle-mcp call`` needs two schemas, not sixteen. With ``caps`` other than the defaults,
    the bounds that are the file cap (:data:`FILE_CAP_BOUNDS`) say ``caps.max_files``, in what
    is advertised and in what is enforced alike.
    """

    def __init__(
        self,
        directory: Path | None = None,
        validator_factory: ValidatorFactory = JsonschemaValidator,
        *,
        fast: bool = True,
        caps: Caps = DEFAULT_CAPS,
    ) -> None:
        directory = directory if directory is not None else contracts_dir()
        documents: dict[str, Any] = {
            path.name: json.loads(path.read_text(encoding="utf-8"))
            for path in sorted(directory.glob("*.json"))
        }
        if not documents:
            raise FileNotFoundError(f"no contract files in {directory}")
        if caps != DEFAULT_CAPS:  # a directory of other contracts is taken as it is
            _with_caps(documents, caps)
        self._documents: dict[str, Mapping[str, Any]] = documents
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

    def advertised_input_schema(self, tool: str) -> dict[str, Any]:
        """What ``tools/list`` sends as ``inputSchema``: the input contract, trimmed for a model."""
        return advertised_input_schema(self._document(tool + INPUT_SUFFIX))

    def advertised_output_schema(self, tool: str) -> dict[str, Any]:
        """What ``tools/list`` sends as ``outputSchema``: the output contract OR the envelope."""
        return advertised_output_schema(
            self._document(tool + OUTPUT_SUFFIX), self._document(ERROR_SCHEMA)
        )

    def compile(self, tools: Iterable[str]) -> None:
        """Build the validators every call of these tools uses (and the envelope's) now, so
        that no call pays the compile of its tool's schemas (the serving warm-up does this)."""
        for tool in tools:
            # Every call checks its arguments with the reference; a result goes through the
            # fast validator, and the reference only compiles for a result it rejects (a bug).
            self._validator(tool + INPUT_SUFFIX)
            self._fast_validator(tool + OUTPUT_SUFFIX)
        self._fast_validator(ERROR_SCHEMA)

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
_INPUT_HEADER = ("$schema", "$id", "title", "description")
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
    for key in _INPUT_HEADER:
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
_HEADER_KEYS = ("$schema", "$id", "title", "description")
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
    header = {key: success.pop(key) for key in _HEADER_KEYS if key in success}
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
