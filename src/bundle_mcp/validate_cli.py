"""``bundle-mcp validate``: the CI surface of the validator.

Exit codes: 0 conformant, 1 not conformant (any ERROR), 2 usage error or unreadable bundle.
Formats: ``text`` for people, ``json`` (contracts/validate_bundle.output.schema.json), ``github``
workflow annotations, and ``sarif`` (SARIF 2.1.0) for code-scanning uploads.

``github`` and ``sarif`` name files relative to the source root: ``$GITHUB_WORKSPACE`` when it is
set, else the working folder, whatever form the bundle argument had (absolute, relative, with
``..``). A file outside that root keeps its absolute path (a ``file://`` URI in SARIF).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import quote

from ._version import __version__
from .cancel import CancelToken
from .cap_options import add_cap_arguments, caps_of
from .errors import ERROR, INFO, WARN, BundleError
from .loader import load_bundle
from .okf.temporal import DATE_PROFILE, INSTANT_PROFILE, PROFILES, reference_from
from .validation import TypeCoverage, ValidateOptions, type_coverage, validate
from .validation.codes import SEVERITY_LEVELS, describe

EXIT_CONFORMANT = 0
EXIT_NOT_CONFORMANT = 1
EXIT_USAGE = 2
FORMATS = ("text", "json", "github", "sarif")
WORKSPACE_ENV = "GITHUB_WORKSPACE"
SRCROOT = "%SRCROOT%"
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"

# GitHub shows at most 10 error, 10 warning and 10 notice annotations of one step (and 50 per
# job); the workflow commands past those are dropped from the annotations. Errors go first, and
# one notice is kept for the summary line, so what GitHub shows is exactly what was annotated.
_GITHUB_COMMAND = {ERROR: "error", WARN: "warning", INFO: "notice"}
GITHUB_ANNOTATIONS_PER_STEP = {ERROR: 10, WARN: 10, INFO: 9}
# Where a person reads what a concept needs (README.md, "What a concept needs").
CONCEPT_HELP = "README.md#what-a-concept-needs"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("bundle", help="the bundle folder (a relative or an absolute path)")
    parser.add_argument(
        "--strict", action="store_true",
        help="also check recommended metadata and body conventions (as warnings: the exit code "
        "still depends on errors only)",
    )
    parser.add_argument(
        "--check-links", action="store_true",
        help="report links, resource and sources[].resource paths that reach nothing in the "
        "bundle (info) and #fragments that name no heading of their target (warning)",
    )
    parser.add_argument(
        "--check-orphans", action="store_true",
        help="report concepts their folder's index.md does not link (warning)",
    )
    parser.add_argument(
        "--target-version", choices=("auto", "0.1", "0.2"), default="auto",
        help="the OKF version to check against; auto reads the root index.md okf_version, and "
        "a bundle without one is read as 0.1, where a rule only 0.1 has is a warning, not an "
        "error (default: %(default)s)",
    )
    parser.add_argument(
        "--temporal-profile", choices=PROFILES, default=DATE_PROFILE,
        help=f"how --as-of and stale_after are read: {DATE_PROFILE} for calendar dates "
        f"(YYYY-MM-DD), {INSTANT_PROFILE} for RFC 3339 date-times with an offset "
        "(default: %(default)s)",
    )
    parser.add_argument(
        "--as-of", metavar="WHEN",
        help="the reference time for staleness, in the temporal profile's form; without it no "
        "concept is reported stale (the clock is never read)",
    )
    parser.add_argument(
        "--format", choices=FORMATS, default="text",
        help="text for people; json (contracts/validate_bundle.output.schema.json); github "
        "(workflow annotations, errors first, then a summary); sarif (SARIF 2.1.0 for code "
        "scanning). github and sarif paths are relative to $GITHUB_WORKSPACE, else to the "
        "working folder (default: %(default)s)",
    )
    add_cap_arguments(parser)


def report_unreadable(prog: str, exc: BundleError | OSError, err: TextIO) -> int:
    """Say on ``err`` why a command could not read its bundle; the exit status (2) to return.

    The loader turns what a bundle's files do into findings or a ``BundleError``; an
    ``OSError`` left over is the host refusing this process (out of file descriptors or memory)
    or a path the loader missed. Either way the bundle could not be read: exit 2, never the 1 of
    an uncaught traceback, which CI would take for "not conformant".
    """
    if isinstance(exc, BundleError):
        print(f"{prog}: {exc.code}: {exc.message}", file=err)
        for d in exc.diagnostics:
            print(f"  {d.severity} {d.code}: {d.message}", file=err)
    else:
        reason = os.strerror(exc.errno) if exc.errno else "unknown error"
        print(f"{prog}: the bundle cannot be read ({reason})", file=err)
    return EXIT_USAGE


def run(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    bundle_path = os.path.normpath(os.path.abspath(args.bundle))
    try:
        caps = caps_of(args)
    except ValueError as exc:
        print(f"bundle-mcp validate: {exc}", file=err)
        return EXIT_USAGE
    try:
        reference = reference_from(
            {"temporal_profile": args.temporal_profile, "as_of": args.as_of}
        )
        token = CancelToken()
        snapshot, _ = load_bundle(bundle_path, token, caps=caps)
        report = validate(
            snapshot,
            ValidateOptions(
                reference=reference,
                strict=args.strict,
                check_links=args.check_links,
                check_orphans=args.check_orphans,
                target_version=args.target_version,
            ),
            token,
        )
    except (BundleError, OSError) as exc:
        return report_unreadable("bundle-mcp validate", exc, err)
    renderers: dict[str, Callable[[dict[str, Any], SourceRoot, str | None], str]] = {
        "text": render_text, "json": render_json, "github": render_github,
        "sarif": render_sarif,
    }
    note = not_a_bundle_note(type_coverage(snapshot, report))
    out.write(renderers[args.format](report, SourceRoot.for_bundle(bundle_path), note))
    return EXIT_CONFORMANT if report["conformance"]["conformant"] else EXIT_NOT_CONFORMANT


def not_a_bundle_note(coverage: TypeCoverage) -> str | None:
    """One sentence for a folder most of whose files declare no type, else ``None``.

    A documentation folder validated by mistake gets one identical finding per file; this says
    what they add up to and what a concept needs. Only the text and github formats print it:
    the json report's contract has no room for it, and SARIF carries findings only.
    """
    if not coverage.mostly_typeless:
        return None
    return (
        f"{coverage.typeless} of {coverage.concepts} Markdown files have no 'type' in their "
        "frontmatter: this folder does not look like an OKF bundle. An OKF concept is a .md "
        "file that starts with a YAML frontmatter block (between '---' lines) holding a "
        "non-empty 'type', such as 'type: Guide'; only index.md and log.md need none. See "
        f"bundle-mcp's {CONCEPT_HELP}"
    )


class SourceRoot:
    """Where CI paths start: ``$GITHUB_WORKSPACE`` when set, else the working folder."""

    def __init__(self, root: str, bundle: str) -> None:
        self.root = os.path.realpath(root)
        self.bundle = os.path.realpath(bundle)

    @classmethod
    def for_bundle(cls, bundle_path: str) -> SourceRoot:
        return cls(os.environ.get(WORKSPACE_ENV) or os.getcwd(), bundle_path)

    def absolute(self, file: str | None) -> str:
        """The absolute path of a bundle-relative finding path (the bundle itself for ``.``)."""
        if not file or file == ".":
            return self.bundle
        return os.path.join(self.bundle, *file.split("/"))

    def relative(self, file: str | None) -> str | None:
        """The path relative to the root with ``/`` separators, or ``None`` outside it."""
        path = self.absolute(file)
        if path != self.root and not path.startswith(self.root.rstrip(os.sep) + os.sep):
            return None
        return Path(os.path.relpath(path, self.root)).as_posix()

    def display(self, file: str | None) -> str:
        """Relative inside the root, absolute outside it."""
        relative = self.relative(file)
        return self.absolute(file) if relative is None else relative

    def root_uri(self) -> str:
        uri = Path(self.root).as_uri()
        return uri if uri.endswith("/") else uri + "/"


def render_json(report: dict[str, Any], root: SourceRoot, note: str | None = None) -> str:
    return json.dumps(report, ensure_ascii=False, indent=2) + "\n"


def render_text(report: dict[str, Any], root: SourceRoot, note: str | None = None) -> str:
    """One line per finding, then the note (when there is one), then the counts."""
    lines = [_text_line(d, d["file"] or ".") for d in report["diagnostics"]]
    if note is not None:
        lines.append(note)
    lines.append(_summary(report))
    return "\n".join(lines) + "\n"


def _text_line(d: dict[str, Any], where: str) -> str:
    if d["line"]:
        where += f":{d['line']}"
    return f"{where}: {d['severity']} {d['code']}: {d['message']}"


def _summary(report: dict[str, Any]) -> str:
    verdict = "conformant" if report["conformance"]["conformant"] else "NOT conformant"
    return (
        f"{report['scanned_files']} files scanned; {report['conformance']['errors']} errors, "
        f"{report['guidance']['warnings']} warnings, {report['guidance']['info']} info: {verdict}"
    )


def render_github(report: dict[str, Any], root: SourceRoot, note: str | None = None) -> str:
    """Workflow commands: errors, then warnings, then notices, then the note (a notice of its
    own, when there is one), then one summary notice.

    Each severity's first findings (as many as GitHub shows per step) are annotations; the rest
    are plain log lines with their location, and the summary says how many. The note takes one
    notice from the findings, so GitHub still shows every annotation printed.
    """
    lines: list[str] = []
    not_annotated = 0
    for severity in (ERROR, WARN, INFO):
        found = [d for d in report["diagnostics"] if d["severity"] == severity]
        limit = GITHUB_ANNOTATIONS_PER_STEP[severity] - (
            1 if severity == INFO and note is not None else 0)
        for d in found[:limit]:
            props = [f"file={_gh_property(root.display(d['file']))}"]
            if d["line"]:
                props.append(f"line={d['line']}")
            props.append(f"title={_gh_property('okf ' + d['code'])}")
            lines.append(f"::{_GITHUB_COMMAND[severity]} {','.join(props)}::"
                         f"{_gh_data(d['message'])}")
        for d in found[limit:]:
            # A plain log line, one per finding; a leading "::" would make it a command.
            plain = _gh_data(_text_line(d, root.display(d["file"])))
            lines.append(" " + plain if plain.startswith("::") else plain)
        not_annotated += max(0, len(found) - limit)
    shown = "; every finding is annotated" if not not_annotated else (
        f"; {not_annotated} not annotated (GitHub shows 10 errors, 10 warnings and 10 notices "
        "per step): they are listed in the log above"
    )
    if note is not None:
        lines.append(f"::notice title={_gh_property('okf not an OKF bundle')}::{_gh_data(note)}")
    lines.append(f"::notice title={_gh_property('okf summary')}::"
                 f"{_gh_data(_summary(report) + shown)}")
    return "".join(line + "\n" for line in lines)


def render_sarif(report: dict[str, Any], root: SourceRoot, note: str | None = None) -> str:
    codes = sorted({d["code"] for d in report["diagnostics"]})
    first_severity: dict[str, str] = {}
    for d in report["diagnostics"]:
        first_severity.setdefault(d["code"], d["severity"])
    rules = []
    for code in codes:
        text = describe(code, first_severity[code])
        rules.append({
            "id": code,
            "shortDescription": {"text": text.short},
            "fullDescription": {"text": text.full},
            "help": {"text": text.help},
            "defaultConfiguration": {"level": SEVERITY_LEVELS[text.severity]},
        })
    results = []
    for d in report["diagnostics"]:
        relative = root.relative(d["file"])
        artifact = (
            {"uri": Path(root.absolute(d["file"])).as_uri()}
            if relative is None
            else {"uri": "./" if relative == "." else quote(relative), "uriBaseId": SRCROOT}
        )
        physical: dict[str, Any] = {"artifactLocation": artifact}
        if d["line"]:
            physical["region"] = {"startLine": d["line"]}
        results.append({
            "ruleId": d["code"],
            "ruleIndex": codes.index(d["code"]),
            "level": SEVERITY_LEVELS[d["severity"]],
            "message": {"text": d["message"]},
            "locations": [{"physicalLocation": physical}],
        })
    log = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "bundle-mcp", "version": __version__, "rules": rules}},
            "originalUriBaseIds": {SRCROOT: {"uri": root.root_uri()}},
            "results": results,
        }],
    }
    return json.dumps(log, ensure_ascii=False, indent=2) + "\n"


def _gh_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _gh_property(text: str) -> str:
    return _gh_data(text).replace(":", "%3A").replace(",", "%2C")
