"""The loader's caps as the operator sets them: ``--max-files`` and ``--max-bytes``.

The defaults stay the contract's; a configured cap is what loads, what a write may reach, what
the refusals name and what the contracts that bound one item per file advertise and enforce.
Small bundles and the in-process dispatcher: the same code paths as at 10,000 files.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from bundle_mcp import cli
from bundle_mcp.cli import main
from bundle_mcp.contracts import FILE_CAP_BOUNDS, ContractSet, contracts_dir
from bundle_mcp.dispatch import Dispatcher, ServeConfig, _parse_rejection
from bundle_mcp.errors import BundleError
from bundle_mcp.limits import DEFAULT_CAPS, Caps, parse_size
from bundle_mcp.loader.capture import MAX_FILES, MAX_TOTAL_BYTES
from bundle_mcp.loader.document import parse_document

FILES = 30  # index.md and 29 concepts


def make_bundle(root: Path, concepts: int = FILES - 1) -> Path:
    root.mkdir()
    (root / "index.md").write_text("---\nokf_version: '0.2'\n---\n# Index\n", encoding="utf-8")
    for i in range(concepts):
        (root / f"c{i:02d}.md").write_text(
            f"---\ntype: Guide\ntitle: Concept {i}\n---\n# Concept {i}\n\nRoast body {i}.\n",
            encoding="utf-8",
        )
    return root


def total_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*.md"))


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    return make_bundle(tmp_path / "b")


def dispatcher(bundle: Path, caps: Caps = DEFAULT_CAPS) -> Dispatcher:
    return Dispatcher(ServeConfig(bundles=(str(bundle),), caps=caps))


def call(d: Dispatcher, tool: str, **args: Any) -> tuple[bool, dict[str, Any]]:
    outcome = d.call(tool, {"bundle_path": d.config.bundles[0], **args})
    return outcome.is_error, outcome.structured


# ------------------------------------------------------------------------------ the defaults


def test_the_defaults_are_the_contracts_caps() -> None:
    assert (DEFAULT_CAPS.max_files, DEFAULT_CAPS.max_bytes) == (10_000, 64 * 1024 * 1024)
    assert (MAX_FILES, MAX_TOTAL_BYTES) == (DEFAULT_CAPS.max_files, DEFAULT_CAPS.max_bytes)


def test_default_caps_leave_every_contract_as_its_file() -> None:
    default, files = ContractSet(), ContractSet(caps=DEFAULT_CAPS)
    for path in sorted(contracts_dir().glob("*.json")):
        assert default._document(path.name) == json.loads(path.read_text(encoding="utf-8"))
    for tool in default.tool_names():
        assert files.advertised_input_schema(tool) == default.advertised_input_schema(tool)
        assert files.advertised_output_schema(tool) == default.advertised_output_schema(tool)


def test_every_file_cap_bound_holds_the_default_cap_in_its_file() -> None:
    # A pointer that no longer names the file cap (a field moved or re-bounded) fails here,
    # and ContractSet refuses it too rather than write the cap somewhere else.
    for file, pointer in FILE_CAP_BOUNDS:
        node: Any = json.loads((contracts_dir() / file).read_text(encoding="utf-8"))
        for part in pointer.lstrip("/").split("/"):
            node = node[part]
        assert node == DEFAULT_CAPS.max_files, (file, pointer)


# ------------------------------------------------------------------------------ loading


def test_a_bundle_past_the_configured_file_cap_is_refused_naming_it(bundle: Path) -> None:
    failed, envelope = call(dispatcher(bundle, Caps(max_files=20)), "list_concepts")
    assert failed and envelope["code"] == "resource_limit"
    assert envelope["message"] == "the bundle has more than 20 Markdown files"


def test_a_bundle_within_a_raised_file_cap_loads(bundle: Path) -> None:
    failed, result = call(dispatcher(bundle, Caps(max_files=40)), "list_concepts")
    assert not failed and len(result["concepts"]) == FILES - 1


def test_the_byte_cap_is_the_configured_one(bundle: Path) -> None:
    size = total_bytes(bundle)
    failed, envelope = call(dispatcher(bundle, Caps(max_bytes=size - 1)), "list_concepts")
    assert failed and envelope["code"] == "resource_limit"
    assert envelope["message"] == f"the bundle's Markdown files exceed {size - 1} bytes in total"
    failed, _ = call(dispatcher(bundle, Caps(max_bytes=size)), "list_concepts")
    assert not failed


def test_a_refresh_after_a_change_keeps_to_the_configured_cap(bundle: Path) -> None:
    d = dispatcher(bundle, Caps(max_files=FILES))
    assert not call(d, "list_concepts")[0]
    (bundle / "extra.md").write_text("---\ntype: Guide\n---\n# Extra\n", encoding="utf-8")
    failed, envelope = call(d, "list_concepts")
    assert failed and envelope["message"] == f"the bundle has more than {FILES} Markdown files"


# ------------------------------------------------------------------------------ the contracts


def test_the_advertised_list_concepts_schema_says_the_configured_cap(bundle: Path) -> None:
    for cap in (20, 60_000):
        served = {t.name: t for t in dispatcher(bundle, Caps(max_files=cap)).tools()}
        schema = served["list_concepts"].output_schema["anyOf"][0]
        assert schema["properties"]["concepts"]["maxItems"] == cap
    default = {t.name: t for t in dispatcher(bundle).tools()}["list_concepts"]
    assert default.output_schema["anyOf"][0]["properties"]["concepts"]["maxItems"] == 10_000


def test_the_enforced_contract_follows_the_configured_cap(bundle: Path) -> None:
    failed, result = call(dispatcher(bundle), "list_concepts")
    assert not failed
    three = {**result, "concepts": result["concepts"][:3]}
    ContractSet().check_output("list_concepts", three)
    ContractSet(caps=Caps(max_files=3)).check_output("list_concepts", three)
    with pytest.raises(BundleError, match="internal error"):
        ContractSet(caps=Caps(max_files=2)).check_output("list_concepts", three)


# ------------------------------------------------------------------------------ writes


def write(d: Dispatcher, concept_id: str) -> tuple[bool, dict[str, Any]]:
    return call(d, "write_concept", concept_id=concept_id, frontmatter="type: Guide\n",
                body=f"# {concept_id}\n")


def test_a_write_past_the_configured_file_cap_is_refused(bundle: Path) -> None:
    d = dispatcher(bundle, Caps(max_files=FILES))
    failed, envelope = write(d, "new-one")
    assert failed and envelope["code"] == "resource_limit"
    assert envelope["message"] == f"the bundle would have more than {FILES} Markdown files"
    assert not (bundle / "new-one.md").exists()


def test_a_write_within_a_raised_file_cap_is_published(bundle: Path) -> None:
    failed, result = write(dispatcher(bundle, Caps(max_files=FILES + 1)), "new-one")
    assert not failed, result
    assert (bundle / "new-one.md").exists()


def test_a_write_past_the_configured_byte_cap_is_refused(bundle: Path) -> None:
    size = total_bytes(bundle)
    failed, envelope = write(dispatcher(bundle, Caps(max_bytes=size + 5)), "new-one")
    assert failed and envelope["code"] == "resource_limit"
    assert envelope["message"] == (
        f"the bundle's Markdown files would exceed {size + 5} bytes in total")


# ------------------------------------------------------------------------------ the commands


@pytest.mark.parametrize("text, size", [
    ("1", 1), ("2048", 2048), ("64K", 64 * 1024), ("64k", 64 * 1024), ("64KiB", 64 * 1024),
    ("3M", 3 * 1024**2), ("3MB", 3 * 1024**2), ("1G", 1024**3), (" 7 ", 7),
])
def test_sizes_read_with_binary_suffixes(text: str, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["0", "-1", "0K", "1.5M", "M", "", "12T", "ten", "²"])
def test_bad_sizes_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="size of 1 or more bytes"):
        parse_size(text)


@pytest.mark.parametrize("command", [
    ["validate", "{b}"], ["graph", "{b}"], ["call", "list_concepts", "--bundle", "{b}"],
    ["serve", "{b}"],
])
@pytest.mark.parametrize("option", [
    # A negative number is given with '=' (argparse takes "-3" alone for an option).
    ["--max-files", "0"], ["--max-files=-3"], ["--max-files", "many"],
    ["--max-bytes", "0"], ["--max-bytes=-1M"], ["--max-bytes", "lots"],
])
def test_bad_cap_options_exit_2_with_one_line(
    bundle: Path, command: list[str], option: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [part.format(b=bundle) for part in command] + option
    assert main(argv) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and option[0].split("=")[0] in lines[0], captured.err
    assert captured.out == ""


def test_validate_refuses_past_the_configured_cap_as_past_the_default(
    bundle: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["validate", str(bundle), "--max-files", "20"]) == 2
    assert "resource_limit: the bundle has more than 20 Markdown files" in capsys.readouterr().err
    assert main(["validate", str(bundle), "--max-files", "40", "--format", "json"]) in (0, 1)
    assert json.loads(capsys.readouterr().out)["scanned_files"] == FILES
    assert main(["validate", str(bundle), "--max-bytes", "1K"]) == 2
    assert "exceed 1024 bytes in total" in capsys.readouterr().err


def test_call_refuses_past_the_configured_cap(
    bundle: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["call", "list_concepts", "--bundle", str(bundle), "--max-files", "20"]) == 1
    envelope = json.loads(capsys.readouterr().out)
    assert envelope["message"] == "the bundle has more than 20 Markdown files"
    assert main(["call", "list_concepts", "--bundle", str(bundle), "--max-files", "40"]) == 0
    assert len(json.loads(capsys.readouterr().out)["concepts"]) == FILES - 1


# ------------------------------------------------------------------------------ the envelope


def test_more_broken_files_than_the_envelope_holds_still_make_a_valid_envelope() -> None:
    # Past the default cap a bundle can have more broken files than error.schema.json's 10,000
    # diagnostics; the rejection lists the first 9,999 and counts them all.
    broken = parse_document("bad.md", b"---\ntype: [\n---\nbody\n")
    assert broken.parse_error is not None
    many = tuple(dataclasses.replace(broken, path=f"f{i:05d}.md") for i in range(10_001))
    envelope = _parse_rejection(many).envelope()
    ContractSet().check_envelope(envelope)
    assert envelope["message"] == (
        "10001 file(s) of the bundle cannot be parsed (the first 9999 by path are listed)")
    assert len(envelope["diagnostics"]) == 10_000


def test_serve_hands_the_configured_caps_to_its_dispatcher(
    bundle: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[ServeConfig] = []
    monkeypatch.setattr(cli, "_with_dispatcher",
                        lambda config, serve, remotes=None, prechecks=None:
                        seen.append(config) or 0)
    assert main(["serve", str(bundle), "--max-files", "60000", "--max-bytes", "512M"]) == 0
    assert main(["serve", str(bundle)]) == 0
    assert [c.caps for c in seen] == [Caps(60_000, 512 * 1024**2), DEFAULT_CAPS]
