"""The validator seam: one keyword failure as a :class:`Violation`, whichever library found it;
``jsonschema`` as the reference adapter, jsonschema-rs as the fast yes/no check of results."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import jsonschema
import referencing
from jsonschema import Draft202012Validator

try:  # the fast path for results; jsonschema stays the authority (see ContractSet._check_internal)
    import jsonschema_rs
except ImportError:  # pragma: no cover - the dependency is declared; a missing wheel only slows
    # mypy has no "module or None" type for an optional import; users check `is not None`.
    jsonschema_rs = None  # type: ignore[assignment]

__all__ = ["FAST_AVAILABLE", "FastValidator", "JsonschemaValidator", "SchemaValidator",
           "ValidatorFactory", "Violation"]

# Whether jsonschema-rs is installed, so that FastValidator can be used.
FAST_AVAILABLE = jsonschema_rs is not None

_MAX_DETAIL = 1000


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

    The schema is checked against the Draft 2020-12 metaschema first (``SchemaError`` when it
    breaks it), unless ``known_valid``: a schema the test suite checks, such as the package's
    own contracts, whose check cost 15-20 ms a file on the first call of each tool.
    """

    def __init__(self, schema: Mapping[str, Any], *, known_valid: bool = False) -> None:
        if not known_valid:
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
