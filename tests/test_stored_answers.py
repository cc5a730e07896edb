"""A kept answer outlives its process (``bundle_mcp.stored_answers``): the next process on the
same files writes the stored encoding without building a document, byte for byte what the
first one made; anything that does not check out is made again. Work counters (documents
built, tools run), no timing.
"""

from __future__ import annotations

import dataclasses
import shutil
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from bundle_mcp import derived, stored_answers, zstd_frames
from bundle_mcp.cancel import CancelToken
from bundle_mcp.dispatch import Dispatcher, Outcome, ServeConfig, _packed_encoding
from bundle_mcp.errors import BundleError, Diagnostic
from bundle_mcp.loader.parse_cache import ParseCache
from bundle_mcp.okf.scopes import NOTHING, Access, FolderScope
from bundle_mcp.pieces import PackedBytes
from bundle_mcp.readers import ALL_READER, Reader
from bundle_mcp.readiness import Readiness
from bundle_mcp.snapshots import SnapshotCache
from bundle_mcp.tools import load_tools

if TYPE_CHECKING:  # fixtures' types only; pytest provides the objects
    from conftest import BundleFactory

# The tools that keep their answers, each with its default call and a variant.
CALLS = [
    ("list_concepts", {}),
    ("list_concepts", {"as_of": "2026-01-01"}),
    ("get_semantic_graph", {}),
    ("bundle_summary", {}),
    ("bundle_summary", {"top": 3}),
    ("validate_bundle", {"check_links": True, "check_orphans": True}),
]


def pages(count: int = 24) -> dict[str, str]:
    files = {"index.md": '---\nokf_version: "0.2"\n---\n# Home\n\nSee [p0](/f0/p0.md).\n'}
    for n in range(count):
        nxt = (n + 1) % count
        files[f"f{n % 3}/p{n}.md"] = (
            f'---\ntype: Guide\ntitle: "Page {n} \\"quoted\\""\n'
            f"description: A page with a backslash \\\\ and more\n"
            f"relations:\n  - type: depends_on\n    target: /f{nxt % 3}/p{nxt}.md\n---\n"
            f"# Page {n}\n\nSee [the next](/f{nxt % 3}/p{nxt}.md) and [gone](/nowhere.md).\n")
    return files


def dispatcher_on(bundle: str, cache: Path | None) -> tuple[Dispatcher, ParseCache]:
    parse = ParseCache(cache)
    return (Dispatcher(ServeConfig(bundles=(bundle,)),
                       cache=SnapshotCache(parse_cache=parse, watch=False)), parse)


def warmed(bundle: str, cache: Path) -> tuple[Dispatcher, ParseCache]:
    """A first server process, warmed: its warm-up keeps (and stores) the default answers."""
    dispatcher, parse = dispatcher_on(bundle, cache)
    readiness = Readiness(dispatcher, follow=False)
    readiness.start()
    assert readiness.wait(120)
    readiness.stop(wait=10)
    parse.settle_parts()  # its save wrote the answers kept before it
    return dispatcher, parse


class Runs:
    """Counts the runs of the tools that keep their answers."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def tools(self) -> dict[str, Any]:
        specs = load_tools()
        out = {}
        for name, spec in specs.items():
            if spec.cache_results:
                out[name] = _counted(spec, self.names)
            else:
                out[name] = spec
        return out


def _counted(spec: Any, names: list[str]) -> Any:
    def run(call: Any, params: dict[str, Any]) -> dict[str, Any]:
        names.append(spec.name)
        result: dict[str, Any] = spec.run(call, params)
        return result

    return dataclasses.replace(spec, run=run)


def restarted(bundle: str, cache: Path, runs: Runs, reader: Reader = ALL_READER
              ) -> Dispatcher:
    """A second process's dispatcher, not warmed: a call does only its own work."""
    return Dispatcher(ServeConfig(bundles=(bundle,), reader=reader), tools=runs.tools(),
                      cache=SnapshotCache(parse_cache=ParseCache(cache), watch=False))


def wire_bytes(outcome: Outcome) -> tuple[bytes, bytes]:
    encoded = outcome.encoded()
    assert encoded is not None
    return encoded.structured.joined(), encoded.text.joined()


def test_a_restart_writes_each_stored_answer_without_building_a_document(
    tmp_bundle: BundleFactory, tmp_path: Path
) -> None:
    bundle, cache = tmp_bundle(pages()), tmp_path / "cache"
    first, parse = warmed(bundle, cache)
    made = {(tool, str(arguments)): first.call(tool, arguments) for tool, arguments in CALLS}
    parse.settle_parts()

    runs = Runs()
    second = restarted(bundle, cache, runs)
    for tool, arguments in CALLS:
        got = second.call(tool, arguments)
        expected = made[(tool, str(arguments))]
        assert not got.is_error, got.structured
        assert wire_bytes(got) == wire_bytes(expected)
        assert got.text == expected.text
        assert got.structured == expected.structured
    assert runs.names == []  # every answer read back: no tool ran
    snapshot = second.served_snapshot(bundle, CancelToken(), ALL_READER)
    assert list(snapshot.documents.built()) == []  # and no document was built for them


def test_a_damaged_or_missing_stored_answer_is_made_again(
    tmp_bundle: BundleFactory, tmp_path: Path
) -> None:
    bundle, cache = tmp_bundle(pages()), tmp_path / "cache"
    first, parse = warmed(bundle, cache)
    expected = first.call("get_semantic_graph", {})
    parse.settle_parts()
    (database,) = (cache / "parse").glob("*.sqlite3")
    with sqlite3.connect(database) as db:
        (rowid, value), = db.execute("SELECT rowid, value FROM parts WHERE key LIKE ?",
                                     (f"{stored_answers.FORMAT}/get_semantic_graph/%",))
        stored = zstd_frames.unpacked(value)
        flipped = bytearray(stored)
        flipped[-40] ^= 0x01  # inside the compressed frame
        db.execute("UPDATE parts SET value = ? WHERE rowid = ?",
                   (zstd_frames.packed(bytes(flipped)), rowid))

    runs = Runs()
    second = restarted(bundle, cache, runs)
    got = second.call("get_semantic_graph", {})
    assert runs.names == ["get_semantic_graph"]
    assert wire_bytes(got) == wire_bytes(expected)


def test_a_stored_answer_is_not_read_after_a_change(
    tmp_bundle: BundleFactory, tmp_path: Path
) -> None:
    bundle, cache = tmp_bundle(pages()), tmp_path / "cache"
    first, parse = warmed(bundle, cache)
    first.call("list_concepts", {})
    parse.settle_parts()
    Path(bundle, "f0/p0.md").unlink()

    runs = Runs()
    got = restarted(bundle, cache, runs).call("list_concepts", {})
    assert runs.names == ["list_concepts"]
    fresh, _ = dispatcher_on(bundle, None)
    assert got.text == fresh.call("list_concepts", {}).text


def test_a_readers_view_neither_reads_nor_stores_answers(
    tmp_bundle: BundleFactory, tmp_path: Path
) -> None:
    """A reader sees a part of the bundle: its answers are its view's, never the whole
    bundle's stored ones, and are not stored for anyone."""
    bundle, cache = tmp_bundle(pages()), tmp_path / "cache"
    _, parse = warmed(bundle, cache)
    parse.settle_parts()
    scoped = Reader("scoped", Access(FolderScope.of(["f1"]), NOTHING))

    runs = Runs()
    second = restarted(bundle, cache, runs, reader=scoped)
    got = second.call("list_concepts", {})
    assert runs.names == ["list_concepts"]
    assert {c["path"].split("/")[0] for c in got.structured["concepts"]} == {"f1"}
    parse.settle_parts()
    (database,) = (cache / "parse").glob("*.sqlite3")
    with sqlite3.connect(database) as db:
        stored = db.execute("SELECT count(*) FROM parts WHERE key LIKE ?",
                            (f"{stored_answers.FORMAT}/list_concepts/%",)).fetchone()[0]
    assert stored == 1  # the warm-up's default answer only


def test_the_key_holds_what_the_revision_does_not(tmp_bundle: BundleFactory) -> None:
    bundle = tmp_bundle(pages())
    dispatcher, _ = dispatcher_on(bundle, None)
    snapshot = dispatcher.served_snapshot(bundle, CancelToken(), ALL_READER)
    key = stored_answers.answer_key(snapshot, "list_concepts", "{}", "settings")
    assert key.startswith(f"{stored_answers.FORMAT}/list_concepts/")
    assert key == stored_answers.answer_key(snapshot, "list_concepts", "{}", "settings")
    others = {
        stored_answers.answer_key(snapshot, "bundle_summary", "{}", "settings"),
        stored_answers.answer_key(snapshot, "list_concepts", '{"top":3}', "settings"),
        stored_answers.answer_key(snapshot, "list_concepts", "{}", "other settings"),
    }
    Path(bundle, "assets").mkdir()
    Path(bundle, "assets", "logo.png").write_bytes(b"\x89PNG")
    with_asset = dispatcher.served_snapshot(bundle, CancelToken(), ALL_READER)
    assert with_asset.revision == snapshot.revision  # Markdown only
    others.add(stored_answers.answer_key(with_asset, "list_concepts", "{}", "settings"))
    assert key not in others and len(others) == 4


def test_the_stored_form_reads_back_only_whole() -> None:
    result = {"items": [{"title": 'a "quoted" \\ title', "n": n} for n in range(2000)]}
    packed = _packed_encoding(result)
    assert packed is not None
    encoding, quoted = packed
    data = stored_answers.packed(encoding, quoted.size)
    found = stored_answers.unpacked(data)
    assert found is not None
    back, quoted_size = found
    assert back.joined() == encoding.joined()
    assert quoted_size == quoted.size == len(b"".join(quoted))
    header = len(data) - len(encoding.compressed)
    broken = [b"", data[:header - 1], b"xxxx" + data[4:], data[:-len(data) // 3],
              data[:header] + b"\x00" + data[header + 1:],
              data[:4] + (encoding.size + 1).to_bytes(8, "little") + data[12:],
              # the JSON string's length, one more or too short for the encoding
              data[:12] + (quoted.size + 1).to_bytes(8, "little") + data[20:],
              data[:12] + (encoding.size + 1).to_bytes(8, "little") + data[20:]]
    assert [stored_answers.unpacked(d) for d in broken] == [None] * len(broken)


def test_a_packed_encoding_taken_back_from_its_compressed_bytes_is_the_same() -> None:
    data = b"".join(b'{"n":%d}' % n for n in range(50_000))
    packed = PackedBytes(data)
    again = PackedBytes.of_compressed(packed.compressed, packed.size)
    assert again.joined() == data and again.size == len(data)
    assert b"".join(again) == data


@pytest.mark.parametrize("tool", sorted(name for name, spec in load_tools().items()
                                        if spec.cache_results))
def test_every_tool_that_keeps_its_answers_is_covered(tool: str) -> None:
    assert tool in {name for name, _ in CALLS}


def test_an_answer_over_its_budget_is_stored_as_that_refusal(
    tmp_bundle: BundleFactory, tmp_path: Path
) -> None:
    """Issue 29: at 50,000 concepts get_semantic_graph's answer passes 16 MiB, and finding that
    out (building every node) took 18 s after every restart before the refusal was stored."""
    bundle, cache = tmp_bundle(pages()), tmp_path / "cache"

    def small(runs: Runs) -> dict[str, Any]:
        tools = runs.tools()
        tools["get_semantic_graph"] = dataclasses.replace(tools["get_semantic_graph"],
                                                          output_budget=2000)
        return tools

    parse = ParseCache(cache)
    snapshots = SnapshotCache(parse_cache=parse, watch=False)
    first_runs = Runs()
    first = Dispatcher(ServeConfig(bundles=(bundle,)), tools=small(first_runs), cache=snapshots)
    refused = first.call("get_semantic_graph", {})
    assert refused.is_error and refused.structured is not None
    assert refused.structured["code"] == "resource_limit"
    assert first_runs.names == ["get_semantic_graph"]
    snapshots.persist(bundle, first.served_snapshot(bundle, CancelToken(), ALL_READER), now=True)

    runs = Runs()
    second = Dispatcher(ServeConfig(bundles=(bundle,)), tools=small(runs),
                        cache=SnapshotCache(parse_cache=ParseCache(cache), watch=False))
    again = second.call("get_semantic_graph", {})
    assert again.structured == refused.structured and again.text == refused.text
    assert runs.names == []  # read back: the tool did not run
    snapshot = second.served_snapshot(bundle, CancelToken(), ALL_READER)
    assert list(snapshot.documents.built()) == []


def test_a_restarted_warm_up_builds_no_graph_nodes_whatever_the_kept_answer(
    tmp_bundle: BundleFactory, tmp_path: Path
) -> None:
    """Issue 29: get_semantic_graph's default answer is kept (as an answer, or as a refusal
    over its budget), so a restarted warm-up builds none of its nodes (42 MB at 9,978 concepts;
    at 50,000, 11.5 s of building them for a default call kept as refused). A call with other
    arguments reads them back or builds them."""
    bundle, cache = tmp_bundle(pages()), tmp_path / "cache"

    def warm_process(budget: int) -> tuple[Dispatcher, Runs]:
        runs = Runs()
        tools = runs.tools()
        tools["get_semantic_graph"] = dataclasses.replace(tools["get_semantic_graph"],
                                                          output_budget=budget)
        parse = ParseCache(cache)
        dispatcher = Dispatcher(ServeConfig(bundles=(bundle,)), tools=tools,
                                cache=SnapshotCache(parse_cache=parse, watch=False))
        readiness = Readiness(dispatcher, follow=False)
        readiness.start()
        assert readiness.wait(120)
        readiness.stop(wait=10)
        parse.settle_parts()
        return dispatcher, runs

    def nodes(dispatcher: Dispatcher) -> int:
        snapshot = dispatcher.served_snapshot(bundle, CancelToken(), ALL_READER)
        return derived.built(snapshot)["semantic_graph_nodes"]

    cold, cold_runs = warm_process(2000)  # finds the answer over its budget: builds the nodes
    assert cold_runs.names.count("get_semantic_graph") == 1 and nodes(cold) == 1
    restarted, runs = warm_process(2000)
    assert "get_semantic_graph" not in runs.names and nodes(restarted) == 0
    refused = restarted.call("get_semantic_graph", {})
    assert refused.is_error and refused.structured is not None
    assert refused.structured["code"] == "resource_limit"
    assert nodes(restarted) == 0

    shutil.rmtree(cache)
    warm_process(16 * 1024 * 1024)
    again, runs = warm_process(16 * 1024 * 1024)
    assert "get_semantic_graph" not in runs.names and nodes(again) == 0
    assert not again.call("get_semantic_graph", {}).is_error  # the kept answer
    assert nodes(again) == 0
    other = {"as_of": "2027-01-01"}  # an answer no process kept
    expected = Dispatcher(ServeConfig(bundles=(bundle,))).call("get_semantic_graph", other)
    assert again.call("get_semantic_graph", other).text == expected.text
    assert nodes(again) == 1


def test_a_stored_refusal_reads_back_only_whole() -> None:
    error = BundleError("resource_limit", "the structured result is larger than its budget",
                        (Diagnostic(code="recovery_step", severity="info", message="ask less",
                                    line=3),))
    data = stored_answers.packed_refusal(error)
    back = stored_answers.unpacked_refusal(data)
    assert back is not None and back.envelope() == error.envelope()
    assert back.diagnostics == error.diagnostics
    assert stored_answers.unpacked(data) is None  # never taken for an answer
    broken = [b"", data[:-1], b"xxxx" + data[4:], data.replace(b"3", b'"3"'),
              data.replace(b'"info"', b"null"), data.replace(b"]]]", b",1]]]"),
              data[:4] + b'{"code": 1}']
    assert [stored_answers.unpacked_refusal(d) for d in broken] == [None] * len(broken)
