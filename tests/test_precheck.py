"""The frontmatter precheck (loader/precheck.py): a second process's results change no snapshot.

Each test starts the real child (``python -m bundle_mcp.loader.precheck``) on a small bundle of
awkward frontmatter, waits for it, and compares the snapshot loaded with its results against
one loaded without; the work counters (``Prechecked.taken`` and ``loaded_here``) say who loaded
each frontmatter. No test times anything.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bundle_mcp.limits import DEFAULT_CAPS
from bundle_mcp.loader import load_bundle
from bundle_mcp.loader.precheck import STOP_AFTER_DROPPED, Precheck, Prechecked, holds_files
from bundle_mcp.model import Snapshot

FILES = {
    "plain.md": "---\ntitle: Plain\ntags: [a, b]\n---\nBody.\n",
    "nested.md": "---\ntitle: Nested\nsources:\n  - resource: x.md\n    pages: [1, 2]\n"
                 "ratio: 0.5\nflag: true\nnothing: null\n---\nText [x](plain.md).\n",
    "anchors.md": "---\nbase: &b {k: v}\nother: *b\n---\n",
    "tagged.md": "---\nwhen: !!timestamp 2020-01-01\nn: !!int '7'\n---\n",
    "duplicate.md": "---\ntitle: A\ntitle: B\n---\n",
    "bad-yaml.md": "---\ntitle: [unclosed\n---\n",
    "list-top.md": "---\n- a\n- b\n---\n",
    "bad-tag.md": "---\nn: !!int abc\n---\n",
    "no-frontmatter.md": "# Just a body\n",
    "empty-block.md": "---\n---\nBody\n",
    "unterminated.md": "---\ntitle: never closed\n",
    "unicode.md": "---\ntitle: Straße İstanbul 東京\n---\nß\n",
    "folder/deep.md": "---\ntitle: Deep\nrelations:\n  - type: uses\n    target: plain\n---\n",
}


def write_bundle(root: Path, extra: dict[str, bytes] | None = None) -> Path:
    for name, text in FILES.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    for name, data in (extra or {}).items():
        (root / name).write_bytes(data)
    return root


def prechecked_for(root: Path) -> tuple[Precheck, Prechecked]:
    precheck = Precheck.start(str(root), DEFAULT_CAPS.max_files, DEFAULT_CAPS.max_bytes,
                              min_files=0)
    assert precheck is not None
    assert precheck.wait(60), "the precheck child did not finish"
    return precheck, precheck.prechecked


def documents(snapshot: Snapshot) -> dict[str, tuple[Any, ...]]:
    out: dict[str, tuple[Any, ...]] = {}
    for path in snapshot.documents:
        doc = snapshot.documents[path]
        error = doc.parse_error
        out[path] = (doc.frontmatter_value, doc.relations,
                     None if error is None else (error.code, error.message, error.line))
    return out


def test_a_snapshot_with_the_precheck_is_the_snapshot_without(tmp_path: Path) -> None:
    root = write_bundle(tmp_path / "b", {"latin1.md": "---\ntitle: caf\xe9\n---\n".encode(
        "latin-1")})
    _, prechecked = prechecked_for(root)
    with_it, _ = load_bundle(str(root), prechecked=prechecked)
    without, _ = load_bundle(str(root))
    assert with_it.revision == without.revision
    assert documents(with_it) == documents(without)
    # Every file with a decodable, closed frontmatter block came from the child, errors too;
    # none was loaded here.
    blocks = [n for n, t in FILES.items() if t.startswith("---\n") and n != "unterminated.md"]
    assert prechecked.taken == len(blocks)
    assert prechecked.results == {} and prechecked.loaded_here == set()


def test_bytes_changed_after_the_precheck_are_loaded_here(tmp_path: Path) -> None:
    root = write_bundle(tmp_path / "b")
    _, prechecked = prechecked_for(root)
    (root / "plain.md").write_text("---\ntitle: Changed\n---\nBody.\n", encoding="utf-8")
    snapshot, _ = load_bundle(str(root), prechecked=prechecked)
    without, _ = load_bundle(str(root))
    assert documents(snapshot) == documents(without)
    assert snapshot.documents["plain.md"].frontmatter_value["title"] == "Changed"
    assert len(prechecked.loaded_here) == 1
    # The child's result for the old bytes was never used.
    assert len(prechecked.results) == 1


def test_a_child_that_sends_garbage_is_ignored(tmp_path: Path) -> None:
    root = write_bundle(tmp_path / "b")
    process = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdout.buffer.write(b'\\x05\\x00\\x00\\x00junk')"],
        stdout=subprocess.PIPE)
    precheck = Precheck(process)
    assert precheck.wait(60)
    snapshot, _ = load_bundle(str(root), prechecked=precheck.prechecked)
    without, _ = load_bundle(str(root))
    assert documents(snapshot) == documents(without)
    assert precheck.prechecked.taken == 0


@pytest.mark.parametrize("frame", [
    [("sha", ("code", "message"))],  # an error of the wrong shape
    [("sha", ["not", "a", "dict"])],
    {"sha": {}},
    [(1, {})],
])
def test_a_frame_of_the_wrong_shape_ends_the_reading(tmp_path: Path, frame: object) -> None:
    import marshal
    import struct

    data = marshal.dumps(frame)
    script = (f"import sys; sys.stdout.buffer.write({struct.pack('<I', len(data))!r} + "
              f"{data!r})")
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE)
    precheck = Precheck(process)
    assert precheck.wait(60)
    assert precheck.prechecked.results == {}


def test_the_child_is_stopped_once_the_server_overtook_it() -> None:
    prechecked = Prechecked()
    for n in range(STOP_AFTER_DROPPED):
        assert prechecked.take(f"loaded-{n}") is None  # loaded here first
    assert prechecked.arrived([("fresh", {"a": 1})])
    assert not prechecked.arrived(
        [(f"loaded-{n}", {"a": 1}) for n in range(STOP_AFTER_DROPPED)])
    assert prechecked.dropped == STOP_AFTER_DROPPED
    assert prechecked.take("fresh") == {"a": 1} and prechecked.taken == 1


def test_a_small_bundle_is_left_to_the_server(tmp_path: Path) -> None:
    """A folder of fewer files than the child needs gets no child at all, and a child whose
    capture takes fewer (here the symlinks the count does not follow either) sends nothing."""
    root = write_bundle(tmp_path / "b")
    assert Precheck.start(str(root), DEFAULT_CAPS.max_files, DEFAULT_CAPS.max_bytes) is None
    files = len(FILES)
    precheck = Precheck.start(str(root), DEFAULT_CAPS.max_files, DEFAULT_CAPS.max_bytes,
                              min_files=files)
    assert precheck is not None and precheck.wait(60)
    assert len(precheck.prechecked.results) == files - 2  # two files have no block to load
    (root / "elsewhere").mkdir()
    (root / "elsewhere" / "x.md").symlink_to(root / "plain.md")
    assert not holds_files(str(root), files + 1)  # a symlink is not counted
    precheck = Precheck.start(str(root), DEFAULT_CAPS.max_files, DEFAULT_CAPS.max_bytes,
                              min_files=files + 1)
    assert precheck is None


def test_holds_files_counts_regular_files_below_the_folder(tmp_path: Path) -> None:
    root = write_bundle(tmp_path / "b")
    (root / "asset.png").write_bytes(b"\x89PNG")
    assert holds_files(str(root), len(FILES) + 1)
    assert not holds_files(str(root), len(FILES) + 2)
    assert holds_files(str(root), 0)
    assert not holds_files(str(tmp_path / "missing"), 1)


def test_a_bundle_over_the_caps_sends_nothing(tmp_path: Path) -> None:
    root = write_bundle(tmp_path / "b")
    precheck = Precheck.start(str(root), 3, DEFAULT_CAPS.max_bytes, min_files=0)
    assert precheck is not None and precheck.wait(60)
    assert precheck.prechecked.results == {}


def test_a_symlink_out_of_the_bundle_is_not_read(tmp_path: Path) -> None:
    outside = tmp_path / "secret.md"
    outside.write_text("---\nsecret: yes\n---\n", encoding="utf-8")
    root = write_bundle(tmp_path / "b")
    (root / "link.md").symlink_to(outside)
    _, prechecked = prechecked_for(root)
    assert all(value.get("secret") is None for value in prechecked.results.values()
               if isinstance(value, dict))


def test_serve_starts_a_precheck_only_where_the_parse_cache_has_no_rows(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from bundle_mcp import cli
    from bundle_mcp.loader import precheck
    from bundle_mcp.loader.parse_cache import ParseCache
    from bundle_mcp.serve_config import ServeConfig

    monkeypatch.setenv("BUNDLE_MCP_CACHE_DIR", str(tmp_path / "cache"))
    cold = write_bundle(tmp_path / "cold")
    warm = write_bundle(tmp_path / "warm")
    database = ParseCache.default().database(str(warm))
    assert database is not None
    database.parent.mkdir(parents=True)
    database.write_bytes(b"")
    config = ServeConfig(bundles=(str(cold), str(warm), str(tmp_path / "missing")))
    monkeypatch.setattr(precheck, "MIN_FILES", len(FILES))
    with cli._prechecks(config) as started:
        assert sorted(started) == [str(cold)]
    # Many small cold bundles (fewer files each than a child needs): no child is started.
    monkeypatch.setattr(precheck, "MIN_FILES", len(FILES) + 1)
    small = [str(write_bundle(tmp_path / f"small{n}")) for n in range(20)]
    with cli._prechecks(ServeConfig(bundles=tuple(small))) as started:
        assert started == {}


@pytest.mark.slow
def test_a_cold_bundle_served_on_stdio_uses_the_precheck(tmp_path: Path) -> None:
    """The whole path: ``serve`` starts the child when ``initialize`` is answered, the first call
    checks every file and answers as the dispatcher does in process, and at exit the server says
    how many frontmatters came from the child."""
    import json
    import os

    from bundle_mcp.cancel import CancelToken
    from bundle_mcp.dispatch import Dispatcher
    from bundle_mcp.loader.precheck import MIN_FILES
    from bundle_mcp.serve_config import ServeConfig

    root = tmp_path / "big"
    for n in range(MIN_FILES + 20):
        path = root / f"part{n % 7}" / f"c{n:04d}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"---\ntitle: Concept {n}\ntags: [t{n % 5}]\n---\n"
                        f"See [next](c{n + 1:04d}.md).\n", encoding="utf-8")
    env = {**os.environ, "BUNDLE_MCP_LOG_LEVEL": "debug",
           "BUNDLE_MCP_CACHE_DIR": str(tmp_path / "cache")}
    log = tmp_path / "stderr.log"
    arguments = {"concept_id": "part3/c0003"}
    with log.open("wb") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "bundle_mcp.cli", "serve", str(root)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, env=env)
    assert process.stdin is not None and process.stdout is not None
    try:
        for message in (
            {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "test", "version": "1"}}},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
             "params": {"name": "read_concept", "arguments": arguments}},
        ):
            process.stdin.write(json.dumps(message).encode() + b"\n")
        process.stdin.flush()
        replies = [json.loads(process.stdout.readline()) for _ in range(2)]
        process.stdin.close()
        assert process.wait(60) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(30)
        process.stdout.close()
    served = replies[1]["result"]
    expected = Dispatcher(ServeConfig(bundles=(str(root),))).call(
        "read_concept", arguments, CancelToken())
    assert served["structuredContent"] == expected.structured
    lines = [line for line in log.read_text(encoding="utf-8").splitlines()
             if "frontmatter precheck of" in line]
    assert len(lines) == 1, log.read_text(encoding="utf-8")[-2000:]
    used = int(lines[0].split(": ")[-1].split(" results used")[0])
    assert used > 0, lines[0]
