"""Attested Computation concepts (OKF v0.2 §10): the contract, the sanctioned computation text
and the freshness gate a consumer applies before it displays a computed value.

A concept is an Attested Computation when its ``type`` is exactly ``Attested Computation``. Its
contract is top-level frontmatter (§10.2): ``runtime``, ``parameters`` (``{name, type,
required}``), ``computation`` (a path, §6.2), ``executor {resource, receipt[]}`` and ``attester
{resource}``. The computation itself (§10.3) is either the single code block under the body's
level-1 ``# Computation`` heading (fenced or indented: the spec's own examples indent) or the file
``computation`` names, never both. Anything else (no source, two sources, two blocks, a URL, a
file the snapshot could not read, a text over :data:`MAX_COMPUTATION_BYTES`) is a
:class:`ComputationUnavailable` that says which, never a guess.

Nothing here executes or fetches anything.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import posixpath
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import BundleMcpError
from ..model import Document, Snapshot
from .field_paths import BUNDLE, URL, FieldPath, resolve_field_path
from .markdown import markdown_parser
from .temporal import Reference, days_until, parse_either, reached

if TYPE_CHECKING:
    from markdown_it.token import Token

ATTESTED_COMPUTATION = "Attested Computation"
# The runtimes whose computation is SQL that bundle-mcp can canonicalise and compare (§10.3).
SQL_RUNTIMES = frozenset({"bigquery", "postgres", "sqlite", "duckdb", "snowflake", "mysql"})
# A computation an agent can be handed whole; a bigger one is refused, never cut.
MAX_COMPUTATION_BYTES = 1024 * 1024
MAX_CONTRACT_ITEMS = 256  # parameters, receipt fields
# How close to stale_after the gate turns from "ok" to "warn".
NEAR_STALE_DAYS = 30

INLINE = "inline"
FILE = "file"

GATE_OK = "ok"
GATE_WARN = "warn"
GATE_REFUSE = "refuse"
GATE_UNKNOWN = "unknown"


class ComputationUnavailable(BundleMcpError):  # noqa: N818 - a state, not a failure of this code
    """The sanctioned computation cannot be determined: ``code`` says why."""

    def __init__(self, code: str, message: str, hint: str) -> None:
        super().__init__(message, code)
        self.hint = hint


@dataclass(frozen=True, slots=True)
class Parameter:
    name: str
    type: str
    required: bool


@dataclass(frozen=True, slots=True)
class Contract:
    """The contract fields of one Attested Computation, as far as they are well formed.

    ``problems`` names each malformed part (``parameters[1]: …``); the well-formed rest is kept.
    """

    runtime: str | None
    parameters: tuple[Parameter, ...]
    computation: FieldPath | None
    executor: FieldPath | None
    receipt: tuple[str, ...]
    attester: FieldPath | None
    problems: tuple[str, ...]

    @property
    def is_sql(self) -> bool:
        return self.runtime is not None and self.runtime.strip().lower() in SQL_RUNTIMES


@dataclass(frozen=True, slots=True)
class ComputationText:
    """The sanctioned computation: its text and where it is written."""

    text: str
    source: str  # INLINE | FILE
    path: str  # the bundle file that holds it
    line_start: int  # 1-based physical lines of that file
    line_end: int
    language: str  # the fence's info word, else the file's extension, else ""
    sha256: str  # of the text's UTF-8 bytes


def is_attested_computation(doc: Document) -> bool:
    return bool(doc.fm_value("type") == ATTESTED_COMPUTATION)


def contract_of(snapshot: Snapshot, doc: Document) -> Contract:
    fm = doc.fm
    problems: list[str] = []
    runtime = fm.get("runtime")
    if "runtime" in fm and not (isinstance(runtime, str) and runtime.strip()):
        problems.append("runtime: not a non-empty string")
    parameters: list[Parameter] = []
    raw = fm.get("parameters")
    if raw is not None and not isinstance(raw, tuple):
        problems.append("parameters: not a list")
    for n, entry in enumerate(raw if isinstance(raw, tuple) else ()):
        if (
            isinstance(entry, Mapping)
            and isinstance(entry.get("name"), str) and entry["name"].strip()
            and isinstance(entry.get("type"), str) and entry["type"].strip()
            and isinstance(entry.get("required", False), bool)
        ):
            parameters.append(Parameter(entry["name"], entry["type"],
                                        bool(entry.get("required", False))))
        else:
            problems.append(f"parameters[{n}]: needs a string name and type and a boolean "
                            "required")
    names = [p.name for p in parameters]
    for name in sorted({n for n in names if names.count(n) > 1}):
        problems.append(f"parameters: {name!r} is declared more than once")
    executor = _resource(snapshot, doc, "executor", problems)
    receipt: list[str] = []
    block = fm.get("executor")
    if isinstance(block, Mapping) and "receipt" in block:
        fields = block["receipt"]
        if not isinstance(fields, tuple) or not all(isinstance(f, str) and f for f in fields):
            problems.append("executor.receipt: not a list of field names")
        else:
            receipt = list(dict.fromkeys(fields))
            if len(receipt) != len(fields):
                problems.append("executor.receipt: names a field more than once")
    attester = _resource(snapshot, doc, "attester", problems)
    computation = None
    value = fm.get("computation")
    if isinstance(value, str) and value.strip():
        computation = resolve_field_path(snapshot, doc.path, value)
    elif "computation" in fm:
        problems.append("computation: not a non-empty path")
    return Contract(
        runtime=runtime.strip() if isinstance(runtime, str) and runtime.strip() else None,
        parameters=tuple(parameters),
        computation=computation,
        executor=executor,
        receipt=tuple(receipt),
        attester=attester,
        problems=tuple(problems),
    )


def _resource(
    snapshot: Snapshot, doc: Document, key: str, problems: list[str]
) -> FieldPath | None:
    block = doc.fm.get(key)
    if block is None:
        return None
    resource = block.get("resource") if isinstance(block, Mapping) else None
    if isinstance(resource, str) and resource.strip():
        return resolve_field_path(snapshot, doc.path, resource)
    problems.append(f"{key}.resource: not a non-empty path")
    return None


# --------------------------------------------------------------------------------------------
# The computation text


@dataclass(frozen=True, slots=True)
class InlineBlocks:
    """What the body's ``# Computation`` sections hold."""

    sections: int  # level-1 headings titled "Computation"
    blocks: tuple[tuple[int, int, str, str], ...]  # (first line, last line, info, content)


@dataclass(frozen=True, slots=True)
class ComputationTokens:
    """The level-1 ``# Computation`` headings of one parsed body and the code blocks directly
    under them, as tokens (``map`` in 0-based lines of the body), in document order.

    The one reading of the inline computation: :func:`inline_blocks` reports it and the write
    side (``put_attested_computation``) edits what it finds.
    """

    headings: tuple[Token, ...]  # heading_open tokens, ATX or setext
    blocks: tuple[Token, ...]  # fence and code_block tokens


def computation_tokens(tokens: Sequence[Token]) -> ComputationTokens:
    """The code blocks (fenced or indented) directly under each level-1 ``# Computation``
    heading of ``tokens`` (a markdown_parser() parse), up to the next level-1 heading."""
    h1 = [
        (i, tok.map[0])
        for i, tok in enumerate(tokens)
        if tok.type == "heading_open" and tok.tag == "h1" and tok.level == 0 and tok.map
    ]
    own = [(i, line) for i, line in h1 if _heading_text(tokens, i) == "Computation"]
    blocks: list[Token] = []
    for _, start in own:
        end = min([line for _, line in h1 if line > start], default=sys.maxsize)
        blocks.extend(_code_tokens(tokens, start, end))
    return ComputationTokens(tuple(tokens[i] for i, _ in own), tuple(blocks))


def inline_blocks(doc: Document) -> InlineBlocks:
    """The code blocks (fenced or indented) directly under each level-1 ``# Computation``
    heading, up to the next level-1 heading; lines are 1-based lines of the file."""
    body = doc.body
    if not body:
        return InlineBlocks(0, ())
    found = computation_tokens(markdown_parser().parse(body))
    return InlineBlocks(len(found.headings), tuple(_block(tok, doc) for tok in found.blocks))


def _code_tokens(
    tokens: Sequence[Token], after: int = -1, before: int = sys.maxsize
) -> Iterator[Token]:
    """The top-level code blocks (fenced or indented) whose first body line lies strictly
    between ``after`` and ``before``."""
    for tok in tokens:
        if (
            tok.type in ("fence", "code_block")
            and tok.level == 0
            and tok.map
            and after < tok.map[0] < before
        ):
            yield tok


def _block(tok: Token, doc: Document) -> tuple[int, int, str, str]:
    """A code block token as ``(first line, last line, info word, content)``, lines 1-based
    lines of ``doc``'s file."""
    assert tok.map is not None
    first, last = tok.map
    info = tok.info.strip().split(maxsplit=1)[0] if tok.info.strip() else ""
    return first + doc.body_line, last + doc.body_line - 1, info, tok.content


def _heading_text(tokens: Sequence[Token], i: int) -> str:
    return tokens[i + 1].content.strip() if i + 1 < len(tokens) else ""


def computation_text(snapshot: Snapshot, doc: Document, contract: Contract) -> ComputationText:
    """The one sanctioned computation of ``doc``.

    Raises:
        ComputationUnavailable: with code ``computation_missing``, ``computation_ambiguous``,
            ``computation_not_in_bundle``, ``computation_unreadable`` or
            ``computation_too_large``.
    """
    inline = inline_blocks(doc)
    if contract.computation is not None:
        if inline.blocks:
            raise ComputationUnavailable(
                "computation_ambiguous",
                f"{doc.path} names a computation file and also holds a code block under "
                "'# Computation'",
                "keep exactly one: remove the body's code block or the computation field "
                "(OKF v0.2 §10.3)",
            )
        return _file_text(snapshot, contract.computation)
    if inline.sections > 1:
        raise ComputationUnavailable(
            "computation_ambiguous", f"{doc.path} has {inline.sections} '# Computation' sections",
            "keep one '# Computation' section holding one code block",
        )
    if not inline.blocks:
        where = "its '# Computation' section holds no code block" if inline.sections else (
            "it has no '# Computation' section and no computation field")
        raise ComputationUnavailable(
            "computation_missing", f"{doc.path} declares no computation: {where}",
            "put the computation in one code block under '# Computation', or name its file "
            "in the computation field (OKF v0.2 §10.3)",
        )
    if len(inline.blocks) > 1:
        raise ComputationUnavailable(
            "computation_ambiguous",
            f"{doc.path}'s '# Computation' section holds {len(inline.blocks)} code blocks",
            "keep exactly one code block under '# Computation'; move examples elsewhere",
        )
    first, last, info, content = inline.blocks[0]
    _check_size(content, doc.path)
    return ComputationText(content, INLINE, doc.path, first, last, info, _sha(content))


def _file_text(snapshot: Snapshot, target: FieldPath) -> ComputationText:
    if target.kind == URL:
        raise ComputationUnavailable(
            "computation_not_in_bundle",
            f"the computation field names a URL ({target.raw}); bundle-mcp never fetches one",
            "keep the computation file in the bundle and name it by path",
        )
    if target.kind != BUNDLE or target.path is None:
        raise ComputationUnavailable(
            "computation_not_in_bundle",
            f"the computation path {target.raw!r} climbs above the bundle root",
            "name a file inside the bundle",
        )
    path = target.path
    hint = (f"did you mean {target.root_reading!r}? The field is read relative to the concept "
            "(OKF v0.2 §6.2); a bundle-rooted path starts with '/'"
            if target.root_reading else "add the file, or correct the computation field")
    doc = snapshot.documents.get(path)
    if doc is not None:
        return _markdown_file_text(doc)
    attachment = snapshot.attachments.get(path)
    if attachment is None:
        raise ComputationUnavailable(
            "computation_missing", f"the computation file {path} is not in the bundle", hint)
    if attachment.data is None:
        raise ComputationUnavailable(
            "computation_unreadable",
            f"the computation file {path} could not be read: {attachment.problem}",
            "make it a regular file (not a symlink) within the bundle's file caps",
        )
    if len(attachment.data) > MAX_COMPUTATION_BYTES:
        raise _too_large(path)
    try:
        text = attachment.data.decode("utf-8")
    except UnicodeDecodeError:
        raise ComputationUnavailable(
            "computation_unreadable", f"the computation file {path} is not valid UTF-8",
            "save the file as UTF-8",
        ) from None
    text = text.removeprefix("\ufeff")
    lines = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
    extension = posixpath.splitext(path)[1].lstrip(".")
    return ComputationText(text, FILE, path, 1, max(lines, 1), extension, _sha(text))


def _markdown_file_text(doc: Document) -> ComputationText:
    """A computation file that is itself Markdown: its one code block under ``# Computation``,
    or, without that heading, its only code block."""
    if doc.parse_error is not None:
        raise ComputationUnavailable(
            "computation_unreadable",
            f"the computation file {doc.path} cannot be parsed: {doc.parse_error.message}",
            "fix the file's frontmatter and encoding",
        )
    inline = inline_blocks(doc)
    blocks = inline.blocks if inline.sections else _all_blocks(doc)
    if len(blocks) != 1:
        raise ComputationUnavailable(
            "computation_missing" if not blocks else "computation_ambiguous",
            f"the computation file {doc.path} holds {len(blocks)} code blocks, not one",
            "keep exactly one code block in it",
        )
    first, last, info, content = blocks[0]
    _check_size(content, doc.path)
    return ComputationText(content, FILE, doc.path, first, last, info, _sha(content))


def _all_blocks(doc: Document) -> tuple[tuple[int, int, str, str], ...]:
    body = doc.body
    tokens = markdown_parser().parse(body) if body else []
    return tuple(_block(tok, doc) for tok in _code_tokens(tokens))


def _check_size(text: str, path: str) -> None:
    if len(text.encode("utf-8")) > MAX_COMPUTATION_BYTES:
        raise _too_large(path)


def _too_large(path: str) -> ComputationUnavailable:
    return ComputationUnavailable(
        "computation_too_large",
        f"the computation in {path} is larger than {MAX_COMPUTATION_BYTES} bytes",
        "split the computation; bundle-mcp hands an agent a computation whole or not at all",
    )


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def attachment_paths(snapshot: Snapshot) -> frozenset[str]:
    """The non-Markdown files whose bytes the snapshot must hold: every file an Attested
    Computation's ``computation`` field names that is an asset of the bundle."""
    if not snapshot.assets:
        return frozenset()  # nothing to attach: no document needs to be built to know it
    wanted = set()
    for doc in snapshot.concepts.values():
        if not is_attested_computation(doc):
            continue
        value = doc.fm.get("computation")
        if not isinstance(value, str) or not value.strip():
            continue
        target = resolve_field_path(snapshot, doc.path, value)
        if target.kind == BUNDLE and target.path is not None and target.path in snapshot.assets:
            wanted.add(target.path)
    return frozenset(wanted)


# --------------------------------------------------------------------------------------------
# Freshness (§10.5 step 6)


def freshness(fm: Mapping[str, Any], ref: Reference) -> dict[str, Any]:
    """The gate a consumer applies before displaying a value: ``refuse`` when stale (``as_of
    >= stale_after``), ``warn`` within :data:`NEAR_STALE_DAYS` of it, ``ok`` otherwise or
    without ``stale_after``; ``unknown`` without ``as_of``.

    A date and an instant compare, whatever the request's profile (``temporal.reached``: a
    date is its whole UTC day). What the server cannot decide (the instant falls inside the
    date's day, or ``stale_after`` is neither a date nor an instant) is ``warn``, never
    ``refuse``: it is the bundle's value that is too coarse or broken, not the run.
    """
    raw = fm.get("stale_after")
    out: dict[str, Any] = {"gate": GATE_OK, "stale_after": None, "as_of": ref.as_of,
                           "days_left": None, "detail": ""}
    if raw is None:
        out["detail"] = "no stale_after: the computation does not go stale"
        return out
    text = raw if isinstance(raw, str) else None
    limit = parse_either(text)
    out["stale_after"] = text
    if ref.moment is None:
        out["gate"] = GATE_UNKNOWN
        out["detail"] = "pass as_of to judge freshness (the wall clock is never read)"
        return out
    if limit is None:
        out["gate"] = GATE_WARN
        shown = f"stale_after {text}" if text is not None else "stale_after (not a string)"
        out["detail"] = (f"{shown} is not a date or an instant: freshness cannot be decided; "
                         "check the computation is current before relying on the value")
        return out
    stale = reached(ref.moment, limit)
    if stale is None:
        out["gate"] = GATE_WARN
        out["detail"] = (
            f"as_of {ref.as_of} and stale_after {text} fall on the same day (UTC): freshness "
            "cannot be decided at a date's precision; "
            + ("pass temporal_profile instant-0b87c52 with an as_of instant to decide"
               if isinstance(ref.moment, dt.date)
               else "write stale_after as an instant to decide")
        )
        return out
    days = days_until(ref.moment, limit)
    out["days_left"] = days
    if stale:
        out["gate"] = GATE_REFUSE
        out["detail"] = f"stale since {text}: refuse to display the value until re-verified"
    elif days <= NEAR_STALE_DAYS:
        out["gate"] = GATE_WARN
        out["detail"] = f"stale after {text}, {days} day(s) from as_of"
    else:
        out["detail"] = f"fresh until {text}"
    return out
