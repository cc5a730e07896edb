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

One job a module:

- ``files``: where the contract files are and the bounds in them that are the file cap;
- ``contract_set``: :class:`ContractSet`, the files parsed once, checking requests and results;
- ``validators``: the validator seam (:class:`Violation`, the jsonschema and jsonschema-rs
  adapters);
- ``advertise``: the input and output schemas as ``tools/list`` advertises them;
- ``wording``: violations as ``invalid_input`` diagnostics, and the errors they make.

Everything public is importable from ``bundle_mcp.contracts`` itself.
"""

from .advertise import (
    ANNOTATIONS,
    ENVELOPE_DEF_PREFIX,
    FOLD_KEY,
    HINT_KEY,
    ON_ERROR,
    advertised_input_schema,
    advertised_output_schema,
)
from .contract_set import ContractSet
from .files import ERROR_SCHEMA, FILE_CAP_BOUNDS, INPUT_SUFFIX, OUTPUT_SUFFIX, contracts_dir
from .validators import SchemaValidator, Violation
from .wording import MAX_INPUT_DIAGNOSTICS, internal_error, json_path

__all__ = [
    "ANNOTATIONS",
    "ENVELOPE_DEF_PREFIX",
    "ERROR_SCHEMA",
    "FILE_CAP_BOUNDS",
    "FOLD_KEY",
    "HINT_KEY",
    "INPUT_SUFFIX",
    "MAX_INPUT_DIAGNOSTICS",
    "ON_ERROR",
    "OUTPUT_SUFFIX",
    "ContractSet",
    "SchemaValidator",
    "Violation",
    "advertised_input_schema",
    "advertised_output_schema",
    "contracts_dir",
    "internal_error",
    "json_path",
]
