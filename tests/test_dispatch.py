"""The dispatch core and the snapshot cache, driven directly with fake tools (no transport)."""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from bundle_mcp import dispatch
from bundle_mcp.cancel import CancelToken
from bundle_mcp.cli import _call_arguments, _host_port, main
from bundle_mcp.contracts import ContractSet
from bundle_mcp.dispatch import Dispatcher, Outcome, ServeConfig, UnknownTool
from bundle_mcp.errors import BundleError, invalid_request
from bundle_mcp.loader import load_bundle
from bundle_mcp.loader.capture import StatKey
from bundle_mcp.model import Snapshot
from bundle_mcp.snapshots import SnapshotCache
from bundle_mcp.tools import TOOL_MODULES, load_tools
from conftest import fake_spec

if TYPE_CHECKING:  # fixtures' types only; pytest provides the objects
    from conftest import BundleFactory, FakeTools

ERROR_CONTRACT = ContractSet()


def envelope_of(outcome: Outcome) -> dict[str, Any]:
    assert outcome.is_error
    ERROR_CONTRACT.check_envelope(outcome.structured)
    assert outcome.text == outcome.structured["message"]
    return outcome.structured


def error_fields(envelope: Mapping[str, Any]) -> list[tuple[str, str | None, str | None]]:
    return [
        (d["code"], d["file"], d["field"])
        for d in envelope["diagnostics"]
        if d["severity"] == "ERROR"
    ]


# --------------------------------------------------------------------------------------------
# Registry and tool list


def test_registry_is_sorted_and_matches_the_contract_pairs() -> None:
    assert TOOL_MODULES == tuple(sorted(TOOL_MODULES))
    assert set(TOOL_MODULES) == set(ContractSet().tool_names())


def test_every_registered_tool_module_loads() -> None:
    specs = load_tools()
    assert sorted(specs) == list(TOOL_MODULES)
    for name, spec in specs.items():
        assert spec.name == name
        assert isinstance(spec.description, str) and spec.description
        assert callable(spec.run)


def test_tools_are_sorted_and_write_tools_hidden_when_read_only(fake_tools: FakeTools) -> None:
    names = [spec.name for spec in fake_tools.dispatcher().tools()]
    assert names == sorted(names)
    assert "write_thing" in names
    read_only = fake_tools.dispatcher(read_only=True)
    assert "write_thing" not in [spec.name for spec in read_only.tools()]
    with pytest.raises(UnknownTool):
        read_only.call("write_thing", {})


def test_tool_specs_carry_the_contracts(fake_tools: FakeTools) -> None:
    spec = next(s for s in fake_tools.dispatcher().tools() if s.name == "echo")
    # The input contract as advertised: without its header (test_tool_surface.py).
    assert spec.input_schema == fake_tools.contracts.advertised_input_schema("echo")
    contract = fake_tools.contracts.input_schema("echo")
    assert spec.input_schema["properties"] == contract["properties"]
    # The output contract OR the error envelope, so a failed call's structuredContent is valid.
    assert spec.output_schema == fake_tools.contracts.advertised_output_schema("echo")
    assert spec.output_schema["anyOf"][0]["required"] == ["word", "concepts", "revision"]
    assert spec.read_only is True
    assert spec.title == "Echo"  # the fake spec's title


def test_unknown_tool_raises_instead_of_returning_an_envelope(fake_tools: FakeTools) -> None:
    with pytest.raises(UnknownTool):
        fake_tools.dispatcher().call("nosuch", {})
    assert issubclass(UnknownTool, KeyError)


def test_a_tool_without_contracts_is_a_startup_error(fake_tools: FakeTools) -> None:
    stray = {"stray": fake_tools.modules["echo"]}
    with pytest.raises(ValueError, match="contract"):
        Dispatcher(ServeConfig(), fake_tools.contracts, tools=stray)


# --------------------------------------------------------------------------------------------
# Success path


def test_success_returns_structured_result_and_its_json_text(
    fake_tools: FakeTools, simple_bundle: str
) -> None:
    outcome = fake_tools.dispatcher(bundles=(simple_bundle,)).call(
        "echo", {"bundle_path": simple_bundle, "word": "héllo"}
    )
    assert not outcome.is_error
    assert outcome.structured["word"] == "héllo"
    assert outcome.structured["concepts"] == ["beans", "roast"]
    assert outcome.text == json.dumps(outcome.structured, ensure_ascii=False, separators=(",", ":"))
    # The tool sees its own arguments only: bundle_path is resolved by the dispatcher.
    [(snapshot, params)] = fake_tools.seen
    assert params == {"word": "héllo"}
    assert isinstance(snapshot, Snapshot)


def test_a_tool_text_function_replaces_the_json_text(
    fake_tools: FakeTools, simple_bundle: str
) -> None:
    outcome = fake_tools.dispatcher(bundles=(simple_bundle,)).call("raw", {"word": "w"})
    assert outcome.text == "raw:w"
    assert outcome.structured["word"] == "w"


def test_arguments_none_means_no_arguments(fake_tools: FakeTools, simple_bundle: str) -> None:
    outcome = fake_tools.dispatcher(bundles=(simple_bundle,)).call("echo", None)
    assert not outcome.is_error


# --------------------------------------------------------------------------------------------
# Bundle resolution


def test_bundle_path_may_be_omitted_with_exactly_one_bundle(
    fake_tools: FakeTools, simple_bundle: str
) -> None:
    outcome = fake_tools.dispatcher(bundles=(simple_bundle,)).call("echo", {})
    assert outcome.structured["concepts"] == ["beans", "roast"]


@pytest.mark.parametrize("count", [0, 2])
def test_bundle_path_is_required_unless_exactly_one_bundle(
    fake_tools: FakeTools, tmp_bundle: BundleFactory, count: int
) -> None:
    bundles = tuple(tmp_bundle({"a.md": "---\ntype: t\n---\n"}) for _ in range(count))
    envelope = envelope_of(
        fake_tools.dispatcher(bundles=bundles, allow_any_bundle=True).call("echo", {})
    )
    assert envelope["code"] == "invalid_request"
    assert error_fields(envelope) == [("invalid_input", None, "$.bundle_path")]


def test_bundle_not_on_the_allow_list_is_rejected_without_naming_it(
    fake_tools: FakeTools, simple_bundle: str, tmp_bundle: BundleFactory
) -> None:
    other = tmp_bundle({"secret.md": "---\ntype: t\n---\n"})
    outcome = fake_tools.dispatcher(bundles=(simple_bundle,)).call("echo", {"bundle_path": other})
    envelope = envelope_of(outcome)
    assert envelope["code"] == "invalid_request"
    assert error_fields(envelope) == [("invalid_input", None, "$.bundle_path")]
    assert other not in json.dumps(envelope)
    assert fake_tools.seen == []


def test_allow_any_bundle_accepts_any_absolute_clean_path(
    fake_tools: FakeTools, tmp_bundle: BundleFactory
) -> None:
    other = tmp_bundle({"x.md": "---\ntype: t\n---\n"})
    outcome = fake_tools.dispatcher(allow_any_bundle=True).call("echo", {"bundle_path": other})
    assert outcome.structured["concepts"] == ["x"]


@pytest.mark.parametrize("suffix", ["/", "/.", "/../bundle0", "//"])
def test_unclean_bundle_path_is_invalid_request(
    fake_tools: FakeTools, simple_bundle: str, suffix: str
) -> None:
    outcome = fake_tools.dispatcher(allow_any_bundle=True).call(
        "echo", {"bundle_path": simple_bundle + suffix}
    )
    envelope = envelope_of(outcome)
    assert envelope["code"] == "invalid_request"
    assert simple_bundle not in json.dumps(envelope)


def test_relative_bundle_path_breaks_the_contract(fake_tools: FakeTools) -> None:
    envelope = envelope_of(
        fake_tools.dispatcher(allow_any_bundle=True).call("echo", {"bundle_path": "docs"})
    )
    assert error_fields(envelope) == [("invalid_input", None, "$.bundle_path")]


def test_symlinked_bundle_is_rejected(
    fake_tools: FakeTools, simple_bundle: str, tmp_path: Path
) -> None:
    link = Path(os.path.realpath(tmp_path)) / "link"
    link.symlink_to(simple_bundle)
    envelope = envelope_of(
        fake_tools.dispatcher(allow_any_bundle=True).call("echo", {"bundle_path": str(link)})
    )
    assert envelope["code"] == "invalid_request"


# --------------------------------------------------------------------------------------------
# Input contract


def test_input_contract_runs_before_the_bundle_is_touched(fake_tools: FakeTools) -> None:
    envelope = envelope_of(
        fake_tools.dispatcher(bundles=("/nonexistent",)).call("echo", {"word": "w" * 17})
    )
    assert envelope["code"] == "resource_limit"
    assert error_fields(envelope) == [("invalid_input", None, "$.word")]
    assert "A word to echo back." in envelope["diagnostics"][0]["message"]


def test_unknown_argument_is_invalid_request(fake_tools: FakeTools, simple_bundle: str) -> None:
    envelope = envelope_of(
        fake_tools.dispatcher(bundles=(simple_bundle,)).call("echo", {"bogus": True})
    )
    assert envelope["code"] == "invalid_request"
    assert error_fields(envelope) == [("invalid_input", None, "$.bogus")]


# --------------------------------------------------------------------------------------------
# Unparseable files

BROKEN_YAML = "---\ntype: [\n---\nbody\n"
ALIAS_BOMB = "---\ntype: x\na: &a [1]\nb: [" + ", ".join(["*a"] * 1001) + "]\n---\n"
HUGE_FRONTMATTER = '---\ntype: x\nd: "' + "x" * (1024 * 1024 + 8) + '"\n---\n'


def test_unparseable_files_reject_query_tools_with_one_diagnostic_per_file(
    fake_tools: FakeTools, tmp_bundle: BundleFactory
) -> None:
    bundle = tmp_bundle(
        {
            "ok.md": "---\ntype: t\n---\n",
            "z/bad.md": BROKEN_YAML,
            "enc.md": b"---\ntype: t\n---\n\xff\xfe",
        }
    )
    envelope = envelope_of(fake_tools.dispatcher(bundles=(bundle,)).call("echo", {}))
    assert envelope["code"] == "operation_rejected"
    assert error_fields(envelope) == [
        ("invalid_encoding", "enc.md", None),
        ("invalid_frontmatter", "z/bad.md", None),
    ]
    assert any(d["code"] == "recovery_step" for d in envelope["diagnostics"])
    assert fake_tools.seen == []


def test_only_alias_abuse_gives_invalid_yaml_graph(
    fake_tools: FakeTools, tmp_bundle: BundleFactory
) -> None:
    bundle = tmp_bundle({"bomb.md": ALIAS_BOMB, "ok.md": "---\ntype: t\n---\n"})
    envelope = envelope_of(fake_tools.dispatcher(bundles=(bundle,)).call("echo", {}))
    assert envelope["code"] == "invalid_yaml_graph"
    assert error_fields(envelope) == [("invalid_yaml_graph", "bomb.md", None)]

    mixed = tmp_bundle({"bomb.md": ALIAS_BOMB, "bad.md": BROKEN_YAML})
    envelope = envelope_of(fake_tools.dispatcher(bundles=(mixed,)).call("echo", {}))
    assert envelope["code"] == "operation_rejected"


def test_oversized_frontmatter_gives_resource_limit(
    fake_tools: FakeTools, tmp_bundle: BundleFactory
) -> None:
    bundle = tmp_bundle({"big.md": HUGE_FRONTMATTER, "bad.md": BROKEN_YAML})
    envelope = envelope_of(fake_tools.dispatcher(bundles=(bundle,)).call("echo", {}))
    assert envelope["code"] == "resource_limit"
    assert [d["severity"] for d in envelope["diagnostics"]][-1] == "INFO"


def test_a_tool_that_reports_parse_errors_runs_on_a_broken_bundle(
    fake_tools: FakeTools, tmp_bundle: BundleFactory
) -> None:
    bundle = tmp_bundle({"bad.md": BROKEN_YAML})
    outcome = fake_tools.dispatcher(bundles=(bundle,)).call("survey", {})
    assert outcome.structured["concepts"] == ["bad.md"]


def test_skip_unparseable_serves_the_rest_and_logs_once_per_revision(
    fake_tools: FakeTools, tmp_bundle: BundleFactory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="bundle_mcp.dispatch")
    bundle = tmp_bundle({"ok.md": "---\ntype: t\n---\n", "bad.md": BROKEN_YAML})
    dispatcher = fake_tools.dispatcher(bundles=(bundle,), skip_unparseable=True)
    for _ in range(3):
        assert dispatcher.call("echo", {}).structured["concepts"] == ["ok"]
    assert len([r for r in caplog.records if "bad.md" in r.getMessage()]) == 1
    Path(bundle, "bad2.md").write_text(BROKEN_YAML, encoding="utf-8")
    dispatcher.call("echo", {})
    assert len([r for r in caplog.records if "bad2.md" in r.getMessage()]) == 1


# --------------------------------------------------------------------------------------------
# Output checks and failures


def test_output_over_its_budget_is_resource_limit(
    fake_tools: FakeTools, simple_bundle: str
) -> None:
    dispatcher = fake_tools.dispatcher(bundles=(simple_bundle,))
    assert not dispatcher.call("budget", {"size": 10}).is_error
    envelope = envelope_of(dispatcher.call("budget", {"size": 300}))
    assert envelope["code"] == "resource_limit"
    assert envelope["diagnostics"][-1]["code"] == "recovery_step"


def test_multibyte_output_is_measured_in_utf8_bytes(
    fake_tools: FakeTools, simple_bundle: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(dispatch, "TEXT_BUDGET", 40)
    dispatcher = fake_tools.dispatcher(bundles=(simple_bundle,))
    assert not dispatcher.call("raw", {"word": "é" * 16}).is_error  # 36 bytes of text
    monkeypatch.setattr(dispatch, "TEXT_BUDGET", 35)
    assert envelope_of(dispatcher.call("raw", {"word": "é" * 16}))["code"] == "resource_limit"


def test_a_result_breaking_its_contract_is_internal_error(
    fake_tools: FakeTools, simple_bundle: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR)
    envelope = envelope_of(fake_tools.dispatcher(bundles=(simple_bundle,)).call("bad", {}))
    assert envelope == {
        "code": "internal_error",
        "message": "internal error; see the server log",
        "retryable": False,
        "diagnostics": [],
    }
    assert "bad.output.schema.json" in caplog.text


def test_an_unexpected_exception_is_logged_and_never_sent(
    fake_tools: FakeTools, simple_bundle: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR)
    envelope = envelope_of(fake_tools.dispatcher(bundles=(simple_bundle,)).call("boom", {}))
    assert envelope["code"] == "internal_error"
    assert "secret" not in json.dumps(envelope)
    assert "secret detail" in caplog.text and "Traceback" in caplog.text


def test_a_bundle_error_from_a_tool_becomes_its_envelope(
    fake_tools: FakeTools, simple_bundle: str
) -> None:
    def not_found(snapshot: Snapshot, params: dict[str, Any], token: CancelToken) -> Any:
        raise BundleError("concept_not_found", "no concept 'ghost' in this bundle")

    fake_tools.modules["echo"] = fake_spec("echo", not_found)
    envelope = envelope_of(fake_tools.dispatcher(bundles=(simple_bundle,)).call("echo", {}))
    assert envelope["code"] == "concept_not_found"


def test_an_envelope_breaking_the_error_contract_becomes_internal_error(
    fake_tools: FakeTools, simple_bundle: str
) -> None:
    def odd(snapshot: Snapshot, params: dict[str, Any], token: CancelToken) -> Any:
        raise BundleError("schema_validation", "not one of our codes")

    fake_tools.modules["echo"] = fake_spec("echo", odd)
    envelope = envelope_of(fake_tools.dispatcher(bundles=(simple_bundle,)).call("echo", {}))
    assert envelope["code"] == "internal_error"


# --------------------------------------------------------------------------------------------
# Cancellation


def test_a_cancelled_token_returns_operation_cancelled_retryable(
    fake_tools: FakeTools, simple_bundle: str
) -> None:
    token = CancelToken()
    token.cancel()
    outcome = fake_tools.dispatcher(bundles=(simple_bundle,)).call("echo", {}, token)
    envelope = envelope_of(outcome)
    assert envelope["code"] == "operation_cancelled"
    assert envelope["retryable"] is True
    assert fake_tools.seen == []


def test_cancelling_a_running_call_stops_it_without_a_partial_result(
    fake_tools: FakeTools, simple_bundle: str
) -> None:
    token = CancelToken()
    dispatcher = fake_tools.dispatcher(bundles=(simple_bundle,))
    outcomes: list[Outcome] = []
    worker = threading.Thread(target=lambda: outcomes.append(dispatcher.call("slow", {}, token)))
    worker.start()
    assert fake_tools.started.wait(5)
    token.cancel()
    worker.join(5)
    assert envelope_of(outcomes[0])["code"] == "operation_cancelled"
    assert fake_tools.stopped_by_cancel.is_set()


def test_a_deadline_cancels_too(fake_tools: FakeTools, simple_bundle: str) -> None:
    outcome = fake_tools.dispatcher(bundles=(simple_bundle,)).call(
        "slow", {"seconds": 5}, CancelToken(deadline_seconds=0.05)
    )
    assert envelope_of(outcome)["retryable"] is True


# --------------------------------------------------------------------------------------------
# Snapshot cache


def test_unchanged_bundle_reuses_the_same_snapshot_object(simple_bundle: str) -> None:
    cache = SnapshotCache()
    first = cache.get(simple_bundle, CancelToken())
    assert cache.get(simple_bundle, CancelToken()) is first


def test_a_changed_file_gives_a_new_revision_and_reuses_the_others(simple_bundle: str) -> None:
    cache = SnapshotCache()
    first = cache.get(simple_bundle, CancelToken())
    Path(simple_bundle, "beans.md").write_text("---\ntype: bean\n---\n# Beans!\n", "utf-8")
    second = cache.get(simple_bundle, CancelToken())
    assert second.revision != first.revision
    assert second.documents["roast.md"] is first.documents["roast.md"]
    assert second.documents["beans.md"] is not first.documents["beans.md"]


def test_a_new_asset_gives_a_new_snapshot_even_with_the_same_revision(
    simple_bundle: str,
) -> None:
    cache = SnapshotCache()
    first = cache.get(simple_bundle, CancelToken())
    Path(simple_bundle, "logo.png").write_bytes(b"\x89PNG")
    second = cache.get(simple_bundle, CancelToken())
    assert second.revision == first.revision
    assert second is not first and "logo.png" in second.assets


class RecordingLoader:
    """Wraps the real loader: records its calls and how many ran at once per path."""

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay
        self.calls: list[tuple[str, Snapshot | None]] = []
        self.active: dict[str, int] = {}
        self.max_active: dict[str, int] = {}
        self.fail_next = False
        self._lock = threading.Lock()

    def __call__(
        self,
        path: str,
        token: CancelToken,
        previous: Snapshot | None,
        stats: Mapping[str, StatKey] | None,
    ) -> tuple[Snapshot, dict[str, StatKey]]:
        with self._lock:
            self.calls.append((path, previous))
            self.active[path] = self.active.get(path, 0) + 1
            self.max_active[path] = max(self.max_active.get(path, 0), self.active[path])
            fail, self.fail_next = self.fail_next, False
        try:
            time.sleep(self.delay)  # a slow load, by design: calls overlap while it runs
            if fail:
                raise invalid_request("the bundle vanished")
            return load_bundle(path, token, previous, stats)
        finally:
            with self._lock:
                self.active[path] -= 1


def test_refreshes_of_one_bundle_are_serialized(simple_bundle: str) -> None:
    loader = RecordingLoader(delay=0.02)
    cache = SnapshotCache(loader, watch=False)
    threads = [
        threading.Thread(target=cache.get, args=(simple_bundle, CancelToken())) for _ in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(5)
    assert loader.max_active[simple_bundle] == 1
    assert len(loader.calls) == 4


def test_different_bundles_do_not_wait_for_each_other(tmp_bundle: BundleFactory) -> None:
    a = tmp_bundle({"a.md": "---\ntype: t\n---\n"})
    b = tmp_bundle({"b.md": "---\ntype: t\n---\n"})
    b_loaded = threading.Event()

    def loader(path: str, token: CancelToken, previous: Any, stats: Any) -> Any:
        if path == a:
            # Holds a's lock until b has loaded: only possible if b does not wait for a.
            assert b_loaded.wait(5)
        result = load_bundle(path, token, previous, stats)
        if path == b:
            b_loaded.set()
        return result

    cache = SnapshotCache(loader, watch=False)
    worker = threading.Thread(target=cache.get, args=(a, CancelToken()))
    worker.start()
    cache.get(b, CancelToken())
    worker.join(5)
    assert not worker.is_alive()


def test_a_failed_refresh_keeps_the_previous_capture(simple_bundle: str) -> None:
    loader = RecordingLoader()
    cache = SnapshotCache(loader, watch=False)
    first = cache.get(simple_bundle, CancelToken())
    loader.fail_next = True
    with pytest.raises(BundleError):
        cache.get(simple_bundle, CancelToken())
    assert cache.get(simple_bundle, CancelToken()) is first
    assert loader.calls[-1][1] is first


def test_least_recently_used_bundles_are_dropped(tmp_bundle: BundleFactory) -> None:
    paths = [tmp_bundle({"a.md": "---\ntype: t\n---\n"}) for _ in range(3)]
    loader = RecordingLoader()
    cache = SnapshotCache(loader, max_bundles=2, watch=False)
    for path in paths:
        cache.get(path, CancelToken())
    cache.get(paths[2], CancelToken())
    cache.get(paths[0], CancelToken())
    previous_by_call = [(p, prev is not None) for p, prev in loader.calls]
    assert previous_by_call[-2:] == [(paths[2], True), (paths[0], False)]


def test_each_call_answers_from_one_snapshot(
    fake_tools: FakeTools, simple_bundle: str
) -> None:
    dispatcher = fake_tools.dispatcher(bundles=(simple_bundle,))
    first = dispatcher.call("echo", {}).structured["revision"]
    assert dispatcher.call("echo", {}).structured["revision"] == first
    assert fake_tools.seen[0][0] is fake_tools.seen[1][0]


# --------------------------------------------------------------------------------------------
# `bundle-mcp call` and `validate`: the same dispatch path from the command line


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_call_prints_the_structured_result(
    capsys: pytest.CaptureFixture[str], simple_bundle: str
) -> None:
    code, out, _ = run_cli(capsys, "call", "list_concepts", "--bundle", simple_bundle)
    assert code == 0
    assert [c["id"] for c in json.loads(out)["concepts"]] == ["beans", "roast"]


def test_call_prints_the_envelope_and_exits_1_on_a_tool_error(
    capsys: pytest.CaptureFixture[str], simple_bundle: str
) -> None:
    code, out, _ = run_cli(
        capsys, "call", "search_concepts", "query=roast", "limit=101", "--bundle", simple_bundle
    )
    assert code == 1
    assert json.loads(out)["code"] == "resource_limit"


def test_call_without_bundle_takes_bundle_path_from_the_arguments(
    capsys: pytest.CaptureFixture[str], simple_bundle: str
) -> None:
    args = json.dumps({"bundle_path": simple_bundle})
    code, out, _ = run_cli(capsys, "call", "list_concepts", "--args", args)
    assert code == 0 and json.loads(out)["concepts"]


@pytest.mark.parametrize(
    "argv",
    [
        ("call", "nosuch"),
        ("call", "list_concepts", "--args", "{not json"),
        ("call", "list_concepts", "--args", "[1]"),
        ("call", "list_concepts", "novalue"),
        ("serve",),
        ("serve", "/nonexistent/bundle"),
    ],
)
def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str], argv: tuple[str, ...]) -> None:
    code, out, err = run_cli(capsys, *argv)
    assert code == 2
    assert out == "" and err.startswith("bundle-mcp: ")


def test_key_value_arguments_are_json_when_they_parse() -> None:
    pairs = ["limit=5", 'kinds=["source"]', "q=x y"]
    assert _call_arguments('{"limit": 3, "query": "a"}', pairs) == {
        "limit": 5,
        "query": "a",
        "kinds": ["source"],
        "q": "x y",
    }


def test_validate_is_delegated(capsys: pytest.CaptureFixture[str], simple_bundle: str) -> None:
    code, out, _ = run_cli(capsys, "validate", simple_bundle, "--format", "json")
    assert code in (0, 1)
    assert "diagnostics" in json.loads(out)


@pytest.mark.parametrize(
    ("value", "expected"),
    [("127.0.0.1:8765", ("127.0.0.1", 8765)), ("8765", ("127.0.0.1", 8765)),
     ("[::1]:80", ("::1", 80)), ("0.0.0.0:9000", ("0.0.0.0", 9000))],
)
def test_http_address_forms(value: str, expected: tuple[str, int]) -> None:
    assert _host_port(value) == expected


def test_a_call_advertises_no_contract_until_the_tools_are_listed(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Advertising every tool's contracts cost a restarted server's first call about 100 ms
    before it could answer: a call checks its arguments against the contract, and the
    advertised forms are made when ``tools/list`` first asks."""
    (tmp_path / "orders.md").write_text("---\ntype: Table\ntitle: Orders\n---\n# Orders\n",
                                        encoding="utf-8")
    advertised: list[str] = []
    real = ContractSet.advertised_input_schema

    def counted(contracts: ContractSet, name: str) -> Any:
        advertised.append(name)
        return real(contracts, name)

    monkeypatch.setattr(ContractSet, "advertised_input_schema", counted)
    dispatcher = Dispatcher(ServeConfig(bundles=(str(tmp_path),)))
    outcome = dispatcher.call("read_concept", {"concept_id": "orders"})
    assert not outcome.is_error, outcome.structured
    assert advertised == []
    listed = dispatcher.tools()
    assert sorted(advertised) == [tool.name for tool in listed]
    assert dispatcher.tools() == listed  # made once
    assert len(advertised) == len(listed)


def test_a_tools_module_is_imported_when_the_tool_is_first_asked_for(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Importing every tool's module was about 135 ms of a restarted server's first answer,
    which runs one: the dispatcher imports a tool's module when that tool is first asked for,
    each once, and every module only when every tool is (a listing)."""
    (tmp_path / "orders.md").write_text("---\ntype: Table\ntitle: Orders\n---\n# Orders\n",
                                        encoding="utf-8")
    loaded: list[str] = []
    real = dispatch.load_tools

    def counted(names: tuple[str, ...] = TOOL_MODULES) -> Any:
        loaded.extend(names)
        return real(names)

    monkeypatch.setattr(dispatch, "load_tools", counted)
    dispatcher = Dispatcher(ServeConfig(bundles=(str(tmp_path),)))
    assert loaded == []
    assert dispatcher.is_read_only_tool("read_concept")
    assert not dispatcher.is_read_only_tool("write_concept")  # served, but it writes
    assert not dispatcher.is_read_only_tool("nosuch") and not dispatcher.is_read_only_tool("")
    assert not dispatcher.call("read_concept", {"concept_id": "orders"}).is_error
    with pytest.raises(UnknownTool):
        dispatcher.call("nosuch", {})
    assert loaded == ["read_concept", "write_concept"]
    assert dispatcher.tool_names() == TOOL_MODULES
    assert sorted(loaded) == sorted(TOOL_MODULES)  # each module asked for once
    read_only = Dispatcher(ServeConfig(bundles=(str(tmp_path),), read_only=True))
    assert not read_only.is_read_only_tool("write_concept")
    with pytest.raises(UnknownTool):
        read_only.call("write_concept", {"concept_id": "orders", "content": "x"})
    assert "write_concept" not in read_only.tool_names()
