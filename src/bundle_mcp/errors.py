"""The exceptions bundle-mcp raises on purpose, and the wire envelope of a failed call.

Every exception the package raises on purpose derives from :class:`BundleMcpError`, which holds
the two things each of them carries: ``message``, the sentence for a person, and ``code``, a
stable machine-readable name where the failure has one (empty otherwise). Only
:class:`BundleError` reaches a client: its ``code`` is an envelope code of docs/DESIGN.md §4, and
the dispatch core turns it into ``{code, message, retryable, diagnostics}``. The others are
caught inside the package and reported in their own way (an exit status and a line on stderr,
a JSON-RPC error, a finding, a blocker). Messages are written here and in the tools, never
taken from exception text, so they never carry an absolute host path.

The tree (the module that defines each class; a second base keeps what ``except`` catches)::

    BundleMcpError                          message, code
    ├── BundleError                         a failed tool call: envelope code, diagnostics
    │   ├── FileMoved                       here: a file changed under its snapshot
    │   ├── LockRefused                     storage/locks.py
    │   └── RecoveryFailed                  storage/recovery.py
    ├── BadReference (ValueError)           okf/relations.py: a relation target's grammar
    ├── SqlSyntaxError (ValueError)         okf/sql.py: SQL that cannot be tokenized
    ├── ComputationUnavailable              okf/computations.py: no sanctioned computation
    ├── EditError                           writes/yaml_edit.py: a frontmatter edit refused
    ├── OpRejected                          writes/patch_ops.py: a patch operation refused
    ├── SelectionError (ValueError)         export/graph.py: a folder or seed that is not there
    ├── OverBudget                          export/graph.py: more nodes than --max-nodes
    ├── UnknownTool (KeyError)              dispatch.py: no tool of that name is served
    ├── ReadersFileError (ValueError)       readers.py: a readers file that cannot be used
    ├── UriError (ValueError)               resources.py: a URI that names no resource
    ├── CursorError (ValueError)            resources.py: a cursor this server did not issue
    ├── PromptError (ValueError)            prompts.py: arguments a prompt cannot render from
    ├── UsageError                          cli.py: a command line that cannot run (exit 2)
    ├── _Usage                              viewer/command.py: the same for ``view``
    ├── LinkEditError                       writes/link_edit.py: a link not editable in place
    ├── _Rejected                           writes/bundle_edit.py: an edit operation refused
    ├── GitMissing                          vcs/git.py: no git command
    ├── GitFailed                           vcs/git.py: git failed, timed out or said too much
    ├── FetchFailed                         remote/fetch.py: a remote bundle not fetched
    ├── ArchiveRefused (ValueError)         remote/archive.py: an archive breaking a rule
    ├── DamagedFrame (ValueError)           zstd_frames.py: a kept row that is not whole
    └── VendorMismatch                      viewer/page.py: vendored JavaScript was altered

Outside the tree: the loader's ``FrontmatterError`` and ``_EntryFailure`` (loader/), and the
private ``_Fallback`` signals of okf/markdown_fast.py, loader/yaml_fast.py and
writes/yaml_edit.py, which are not failures but a way back to the slower path.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

ERROR = "ERROR"
WARN = "WARN"
INFO = "INFO"

INVALID_REQUEST = "invalid_request"
RESOURCE_LIMIT = "resource_limit"
CONCEPT_NOT_FOUND = "concept_not_found"
OPERATION_REJECTED = "operation_rejected"
INVALID_YAML_GRAPH = "invalid_yaml_graph"
REVISION_CONFLICT = "revision_conflict"
PLAN_MISMATCH = "plan_mismatch"
OPERATION_CANCELLED = "operation_cancelled"
INTERNAL_ERROR = "internal_error"

RETRYABLE_CODES = frozenset({OPERATION_CANCELLED})

_ABSOLUTE_PATH = re.compile(r"(?:^|[\s\"'(=])/(?:[^\s/\"']+/)+[^\s\"']*")
REDACTED_MESSAGE = "the message named a host path and was withheld"


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """One finding: a validation result, a parse error, or an input problem.

    ``line`` is 1-based where a line exists. ``file`` is bundle-relative with ``/`` separators.
    """

    code: str
    severity: str
    message: str
    file: str | None = None
    line: int | None = None
    field: str | None = None
    spec_ref: str | None = None
    policy_failure: str | None = None

    def envelope_json(self) -> dict[str, Any]:
        """The shape of an error-envelope diagnostic (no line)."""
        return {
            "code": self.code,
            "severity": self.severity,
            "file": self.file,
            "field": self.field,
            "message": redact(self.message),
            "spec_ref": self.spec_ref,
            "policy_failure": self.policy_failure,
        }

    def validation_json(self) -> dict[str, Any]:
        """The shape of a validate_bundle diagnostic (with line)."""
        return {
            "code": self.code,
            "severity": self.severity,
            "file": self.file,
            "line": self.line,
            "field": self.field,
            "message": redact(self.message),
            "spec_ref": self.spec_ref,
            "policy_failure": self.policy_failure,
        }

    def as_row(self) -> list[Any]:
        """Every field, in order, as JSON-native data (:meth:`from_row` reads it back)."""
        return [self.code, self.severity, self.message, self.file, self.line, self.field,
                self.spec_ref, self.policy_failure]

    @classmethod
    def from_row(cls, row: Any) -> Diagnostic:
        """The diagnostic :meth:`as_row` wrote. Raises ``ValueError`` or ``TypeError`` for a
        row of another shape, a field of the wrong type included (a kept row may be damaged)."""
        code, severity, message, file, line, field, spec_ref, policy_failure = row
        if not all(type(v) is str for v in (code, severity, message)):
            raise TypeError("code, severity and message are strings")
        if not all(v is None or type(v) is str for v in (file, field, spec_ref, policy_failure)):
            raise TypeError("file, field, spec_ref and policy_failure are strings or null")
        if line is not None and type(line) is not int:
            raise TypeError("line is an integer or null")
        return cls(code, severity, message, file, line, field, spec_ref, policy_failure)

    def sort_key(self) -> tuple[str, int, int, str, str, str]:
        return (
            self.file or "",
            self.line or 0,
            _SEVERITY_RANK.get(self.severity, 3),
            self.code,
            self.field or "",
            self.message,
        )


_SEVERITY_RANK = {ERROR: 0, WARN: 1, INFO: 2}


def recovery_step(message: str) -> Diagnostic:
    """An INFO diagnostic telling the caller what to do next."""
    return Diagnostic(code="recovery_step", severity=INFO, message=message)


DID_YOU_MEAN = "did_you_mean"
# A title can be a page long; a suggestion names it only so that the caller recognises it.
_MAX_NAME_IN_SUGGESTION = 120


def did_you_mean(concept_id: str, name: str, path: str, field: str) -> Diagnostic:
    """An INFO diagnostic suggesting a concept for an ID that names none (``okf.suggest``).

    ``field`` is the JSON path of the argument that held the ID, ``path`` the suggested
    concept's file. It only suggests: the caller retries with an ID it chose.
    """
    if len(name) > _MAX_NAME_IN_SUGGESTION:
        name = name[: _MAX_NAME_IN_SUGGESTION - 1] + "…"
    return Diagnostic(
        code=DID_YOU_MEAN,
        severity=INFO,
        file=path,
        field=field,
        message=f"did you mean {concept_id!r} ({name})?",
    )


class BundleMcpError(Exception):
    """The base of every exception bundle-mcp raises on purpose (the tree is in this module's
    docstring).

    ``str()`` of one is its message, as for any exception made from one argument (a subclass
    may say otherwise, as :class:`BundleError` does). Not a frozen dataclass: the interpreter
    sets ``__traceback__``/``__context__`` on exceptions as they propagate (through
    ``contextmanager`` blocks too), which a frozen class refuses.
    """

    code: str = ""  # a stable machine-readable name, where the failure has one

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code


class BundleError(BundleMcpError):
    """A failed call, with the envelope code of docs/DESIGN.md §4."""

    def __init__(self, code: str, message: str, diagnostics: tuple[Diagnostic, ...] = ()) -> None:
        super().__init__(message, code)
        self.args = (code, message)  # as before the base class: copies and pickles rebuild it
        self.diagnostics = tuple(diagnostics)

    @property
    def retryable(self) -> bool:
        return self.code in RETRYABLE_CODES

    def envelope(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "message": redact(self.message),
            "retryable": self.retryable,
            "diagnostics": [d.envelope_json() for d in self.diagnostics],
        }

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


class FileMoved(BundleError):
    """A file's bytes, read when its document was first built, are no longer the ones its
    snapshot counted (the file changed or went since the capture trusted its stat).

    The dispatch core answers the call again from a new capture; only a bundle that keeps
    changing under every attempt lets it reach a client, as a retryable cancellation.
    """

    def __init__(self, path: str) -> None:
        super().__init__(
            OPERATION_CANCELLED,
            f"{path} changed while the call read the bundle; no partial result was kept",
            (recovery_step("retry the same call"),),
        )
        self.path = path


def redact(message: str) -> str:
    """Withhold a message that names an absolute host path (docs/DESIGN.md §4).

    A path counts as a host path when its first segment is a top-level folder of this host
    (``/home/...``, ``/tmp/...``); a bundle-rooted link such as ``/tables/orders.md`` is not.
    """
    for match in _ABSOLUTE_PATH.finditer(message):
        path = match.group(0).lstrip(" \t\"'(=")
        first = path.split("/")[1] if path.count("/") > 1 else ""
        if first not in ("", ".", "..") and os.path.isdir("/" + first):
            return REDACTED_MESSAGE
    return message


def invalid_request(message: str, *diagnostics: Diagnostic) -> BundleError:
    return BundleError(INVALID_REQUEST, message, tuple(diagnostics))


def resource_limit(message: str, step: str) -> BundleError:
    return BundleError(RESOURCE_LIMIT, message, (recovery_step(step),))


def operation_rejected(message: str, *diagnostics: Diagnostic, step: str) -> BundleError:
    """A request this bundle cannot carry out now: ``diagnostics`` say why, then one recovery
    step says what to do first."""
    return BundleError(OPERATION_REJECTED, message, (*diagnostics, recovery_step(step)))


def invalid_input(field: str, message: str) -> Diagnostic:
    """The ERROR diagnostic of an argument (``field``, a JSON path) that is not valid."""
    return Diagnostic(code="invalid_input", severity=ERROR, field=field, message=message)


def cancelled() -> BundleError:
    return BundleError(
        OPERATION_CANCELLED,
        "the operation was cancelled or ran past its deadline; no partial result was kept",
        (recovery_step("retry the same call"),),
    )
