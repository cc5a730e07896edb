"""``bundle-mcp validate``: the CI surface of the validator.

Exit codes: 0 conformant, 1 not conformant (any ERROR), 2 usage error or unreadable bundle.
Formats: ``text`` for people, ``json`` (contracts/validate_bundle.output.schema.json), ``github``
workflow annotations, and ``sarif`` (SARIF 2.1.0) for code-scanning uploads.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, TextIO
from urllib.parse import quote

from . import __version__
from .cancel import CancelToken
from .errors import BundleError
from .loader import load_bundle
from .temporal import DATE_PROFILE, PROFILES, reference_from
from .validation import ValidateOptions, validate

EXIT_CONFORMANT = 0
EXIT_NOT_CONFORMANT = 1
EXIT_USAGE = 2
_LEVELS = {"ERROR": ("error", "error"), "WARN": ("warning", "warning"), "INFO": ("notice", "note")}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("bundle", help="path to the bundle folder")
    parser.add_argument("--strict", action="store_true", help="also check recommended metadata")
    parser.add_argument("--check-links", action="store_true", help="report broken links/anchors")
    parser.add_argument("--check-orphans", action="store_true",
                        help="report concepts their folder's index.md does not link")
    parser.add_argument("--target-version", choices=("auto", "0.1", "0.2"), default="auto")
    parser.add_argument("--temporal-profile", choices=PROFILES, default=DATE_PROFILE)
    parser.add_argument("--as-of", help="reference time for staleness (never the clock)")
    parser.add_argument("--format", choices=("text", "json", "github", "sarif"), default="text")


def run(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    bundle_arg = args.bundle
    bundle_path = os.path.normpath(os.path.abspath(bundle_arg))
    try:
        reference = reference_from(
            {"temporal_profile": args.temporal_profile, "as_of": args.as_of}
        )
        token = CancelToken()
        snapshot, _ = load_bundle(bundle_path, token)
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
    except BundleError as exc:
        print(f"bundle-mcp validate: {exc.code}: {exc.message}", file=err)
        for d in exc.diagnostics:
            print(f"  {d.severity} {d.code}: {d.message}", file=err)
        return EXIT_USAGE
    except OSError as exc:
        # The loader turns what a bundle's files do into findings or a BundleError; what is
        # left is the host refusing this process (out of file descriptors or memory) or a path
        # the loader missed. Either way the bundle could not be read: exit 2, never the 1 of an
        # uncaught traceback, which CI would take for "not conformant".
        reason = os.strerror(exc.errno) if exc.errno else "unknown error"
        print(f"bundle-mcp validate: the bundle cannot be read ({reason})", file=err)
        return EXIT_USAGE
    render = {"text": render_text, "json": render_json, "github": render_github,
              "sarif": render_sarif}[args.format]
    out.write(render(report, bundle_arg))
    return EXIT_CONFORMANT if report["conformance"]["conformant"] else EXIT_NOT_CONFORMANT


def render_json(report: dict[str, Any], bundle_arg: str) -> str:
    return json.dumps(report, ensure_ascii=False, indent=2) + "\n"


def render_text(report: dict[str, Any], bundle_arg: str) -> str:
    lines = []
    for d in report["diagnostics"]:
        where = d["file"] or "."
        if d["line"]:
            where += f":{d['line']}"
        lines.append(f"{where}: {d['severity']} {d['code']}: {d['message']}")
    verdict = "conformant" if report["conformance"]["conformant"] else "NOT conformant"
    lines.append(
        f"{report['scanned_files']} files scanned; {report['conformance']['errors']} errors, "
        f"{report['guidance']['warnings']} warnings, {report['guidance']['info']} info: {verdict}"
    )
    return "\n".join(lines) + "\n"


def render_github(report: dict[str, Any], bundle_arg: str) -> str:
    """GitHub workflow commands; paths are relative to the folder the bundle was named from."""
    lines = []
    for d in report["diagnostics"]:
        level = _LEVELS[d["severity"]][0]
        props = [f"file={_gh_property(_repo_path(bundle_arg, d['file']))}"]
        if d["line"]:
            props.append(f"line={d['line']}")
        props.append(f"title={_gh_property('okf ' + d['code'])}")
        lines.append(f"::{level} {','.join(props)}::{_gh_data(d['message'])}")
    return "".join(line + "\n" for line in lines)


def render_sarif(report: dict[str, Any], bundle_arg: str) -> str:
    rules = sorted({d["code"] for d in report["diagnostics"]})
    results = []
    for d in report["diagnostics"]:
        location: dict[str, Any] = {
            "physicalLocation": {
                "artifactLocation": {"uri": quote(_repo_path(bundle_arg, d["file"]))},
            }
        }
        if d["line"]:
            location["physicalLocation"]["region"] = {"startLine": d["line"]}
        results.append({
            "ruleId": d["code"],
            "ruleIndex": rules.index(d["code"]),
            "level": _LEVELS[d["severity"]][1],
            "message": {"text": d["message"]},
            "locations": [location],
        })
    log = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "bundle-mcp",
                "version": __version__,
                "informationUri": "https://bundle-mcp.dev/",
                "rules": [{"id": code, "shortDescription": {"text": code.replace("_", " ")}}
                          for code in rules],
            }},
            "results": results,
        }],
    }
    return json.dumps(log, ensure_ascii=False, indent=2) + "\n"


def _repo_path(bundle_arg: str, file: str | None) -> str:
    base = bundle_arg.rstrip("/") or "."
    if not file or file == ".":
        return base
    return file if base == "." else f"{base}/{file}"


def _gh_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _gh_property(text: str) -> str:
    return _gh_data(text).replace(":", "%3A").replace(",", "%2C")
