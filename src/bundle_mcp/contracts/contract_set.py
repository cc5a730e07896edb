"""The contract files parsed once, their validators compiled on first use: what is advertised
and what every call is checked against come from the same parsed files."""

from __future__ import annotations

import copy
import functools
import json
import logging
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ..limits import DEFAULT_CAPS, Caps
from .advertise import advertised_input_schema, advertised_output_schema
from .files import ERROR_SCHEMA, INPUT_SUFFIX, OUTPUT_SUFFIX, contracts_dir, with_caps
from .validators import (
    FAST_AVAILABLE,
    FastValidator,
    JsonschemaValidator,
    SchemaValidator,
    ValidatorFactory,
)
from .wording import input_error, internal_error, reject_surrogates

__all__ = ["ContractSet"]

# The name the package's log lines have always had (tests and operators filter on it).
log = logging.getLogger("bundle_mcp.contracts")


class ContractSet:
    """Every contract file parsed once; validators compiled on first use and kept.

    Compiling is lazy: a one-shot ``bundle-mcp call`` needs two schemas, not sixty. The
    package's own contracts are not checked against the metaschema as they compile (15-20 ms a
    file): ``tests/test_contracts_static.py`` checks every file, and
    ``tests/test_advertised_schemas.py`` the files with other caps. Contracts from another
    ``directory`` are checked. With ``caps`` other than the defaults,
    the bounds that are the file cap (:data:`FILE_CAP_BOUNDS`) say ``caps.max_files``, in what
    is advertised and in what is enforced alike.
    """

    def __init__(
        self,
        directory: Path | None = None,
        validator_factory: ValidatorFactory | None = None,
        *,
        fast: bool = True,
        caps: Caps = DEFAULT_CAPS,
    ) -> None:
        own = directory is None  # the package's contracts, checked by its tests
        directory = directory if directory is not None else contracts_dir()
        documents: dict[str, Any] = {
            path.name: json.loads(path.read_text(encoding="utf-8"))
            for path in sorted(directory.glob("*.json"))
        }
        if not documents:
            raise FileNotFoundError(f"no contract files in {directory}")
        if caps != DEFAULT_CAPS:  # a directory of other contracts is taken as it is
            with_caps(documents, caps)
        self._documents: dict[str, Mapping[str, Any]] = documents
        if validator_factory is None:
            validator_factory = (
                functools.partial(JsonschemaValidator, known_valid=True) if own
                else JsonschemaValidator)
        self._factory = validator_factory
        self._validators: dict[str, SchemaValidator] = {}
        self._fast: dict[str, FastValidator | None] = {}
        self._use_fast = fast and FAST_AVAILABLE
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
        reject_surrogates(args)
        name = tool + INPUT_SUFFIX
        violations = list(self._validator(name).violations(args))
        if violations:
            raise input_error(tool, violations, self._document(name))

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
