"""bundle-mcp view without a browser: the page data, the sanitising, the page itself, the
vendored libraries, the layout, the live server and the command line.

tests/test_viewer_browser.py loads the same pages in headless Chromium.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import http.client
import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from bundle_mcp.cli import main
from bundle_mcp.loader import load_bundle
from bundle_mcp.model import Snapshot
from bundle_mcp.viewer import ViewOptions, build_page, page_data
from bundle_mcp.viewer.data import staleness
from bundle_mcp.viewer.layout import NODE_GAP, folder_layout
from bundle_mcp.viewer.markdown_html import render_body
from bundle_mcp.viewer.page import (
    VendorMismatch,
    check_inline_script,
    json_for_script,
    vendored,
)
from bundle_mcp.viewer.serve import LivePage, ViewServer, is_loopback

try:
    from tests.viewer_bundles import EXAMPLE, HOSTILE, PROBLEMS, REPO, write_bundle
except ImportError:  # pytest run without the repository root on sys.path
    from viewer_bundles import (  # type: ignore[no-redef,import-not-found]
        EXAMPLE,
        HOSTILE,
        PROBLEMS,
        REPO,
        write_bundle,
    )

AS_OF = dt.date(2026, 12, 1)
VENDOR = REPO / "src" / "bundle_mcp" / "viewer" / "vendor"


@pytest.fixture(scope="module")
def example() -> Snapshot:
    return load_bundle(str(EXAMPLE))[0]


def _data(snapshot: Snapshot, as_of: dt.date = AS_OF) -> dict[str, Any]:
    return page_data(snapshot, ViewOptions(as_of=as_of, bundle_name="test"))


def _concept(data: dict[str, Any], concept_id: str) -> dict[str, Any]:
    (row,) = [c for c in data["concepts"] if c["id"] == concept_id]
    return row


# --------------------------------------------------------------------------------------------
# The data


def test_the_data_holds_every_concept_and_edge_of_the_example(example: Snapshot) -> None:
    data = _data(example)
    assert [c["id"] for c in data["concepts"]] == list(example.concepts)
    assert data["meta"]["concepts"] == len(example.concepts) == 34
    ids = [c["id"] for c in data["concepts"]]
    kinds = data["edge_kinds"]
    shown = {(ids[s], ids[t], kinds[k]["name"]) for s, t, k in data["edges"]}
    for edge in example.edges:
        if edge.source_id != edge.target_id:
            name = "LINKS_TO" if edge.kind == "navigation" else edge.relation_type
            assert (edge.source_id, edge.target_id, name) in shown
    # The field edge of the example: the report names its runbook as executor.resource.
    assert ("reports/green-on-hand", "reports/run-inventory-query", "EXECUTED_BY") in shown
    assert {k["group"] for k in kinds} == {"link", "relation", "field"}
    assert data["meta"]["edges"] == len(data["edges"])


def test_cards_read_status_trust_and_staleness_through_the_okf_rules(example: Snapshot) -> None:
    guji = _concept(_data(example), "beans/ethiopia-guji")
    assert guji["title"] == "Ethiopia Guji Hambela Natural"
    assert (guji["type"], guji["status"], guji["trust"]) == ("Green Coffee Lot", "stable",
                                                             "human-reviewed")
    assert guji["verified"] == [{"by": "human:maya.okafor", "at": "2026-01-22T15:10:00Z"}]
    assert guji["stale"]["state"] == "stale" and guji["stale"]["stale_after"] == "2026-09-01"
    assert [s["id"] for s in guji["sources"]] == ["importer-spec", "receiving-log"]
    assert guji["sources"][0]["resource"]["kind"] == "url"
    assert guji["resource"]["safe_url"] is True
    # The same concept at other dates: the gate's words, for any concept.
    assert _concept(_data(example, dt.date(2026, 8, 15)), guji["id"])["stale"]["state"] == "due"
    assert _concept(_data(example, dt.date(2026, 1, 1)), guji["id"])["stale"]["state"] == "fresh"


def test_the_attested_computation_contract_is_read_not_run(example: Snapshot) -> None:
    cost = _concept(_data(example), "pricing/landed-cost")["computation"]
    assert cost["runtime"] == "python3.12"
    assert [p["name"] for p in cost["parameters"]][:2] == ["green_price_usd_per_lb",
                                                          "freight_usd_per_kg"]
    assert cost["receipt"] == ["run_id", "code_sha256", "result"]
    assert cost["computation"]["path"] == "pricing/landed_cost.py"
    text = cost["text"]
    assert text["source"] == "file" and text["path"] == "pricing/landed_cost.py"
    data = (EXAMPLE / "pricing" / "landed_cost.py").read_bytes()
    assert text["sha256"] == hashlib.sha256(data.decode().removeprefix("\ufeff").encode()
                                            ).hexdigest()
    assert cost["freshness"]["gate"] == "ok"
    report = _concept(_data(example), "reports/green-on-hand")["computation"]
    assert report["executor"]["concept"] == "reports/run-inventory-query"
    assert _concept(_data(example), "beans/ethiopia-guji")["computation"] is None


def test_broken_links_orphans_and_odd_values_are_reported(tmp_path: Path) -> None:
    snapshot = load_bundle(str(write_bundle(tmp_path / "b", PROBLEMS)))[0]
    data = _data(snapshot)
    alpha, beta = _concept(data, "notes/a"), _concept(data, "notes/b")
    kinds = sorted(b["kind"] for b in alpha["broken"])
    assert kinds == ["anchor", "field", "link", "relation"], alpha["broken"]
    assert any("gone.md" in b["message"] for b in alpha["broken"])
    assert (alpha["orphan"], beta["orphan"]) == (False, True)
    assert (alpha["status"], beta["status"], beta["status_raw"]) == ("draft", "invalid", "bogus")
    assert alpha["trust"] == "machine-confirmed"
    assert alpha["stale"]["state"] == "stale"
    # An instant-valued stale_after compares with the whole as_of day (UTC); days from its start.
    assert beta["stale"]["state"] == "fresh" and beta["stale"]["days_left"] == 31
    assert staleness({}, AS_OF)["state"] == "none"
    assert staleness({"stale_after": "soon"}, AS_OF)["state"] == "invalid"
    # Inside the as_of day the server cannot decide: due, never fresh (nor stale).
    assert staleness({"stale_after": "2026-12-01T15:00:00Z"}, AS_OF)["state"] == "due"
    assert [f["path"] for f in data["folders"]] == ["notes"]
    assert data["folders"][0]["own"] == 2 and data["folders"][0]["index"] is True


def test_the_same_bundle_and_date_give_the_same_page(example: Snapshot) -> None:
    options = ViewOptions(as_of=AS_OF, bundle_name="coffee-roastery")
    first = build_page(example, options)
    assert build_page(example, options) == first
    later = build_page(example, ViewOptions(as_of=dt.date(2027, 6, 1),
                                            bundle_name="coffee-roastery"))
    assert later != first and '"as_of":"2027-06-01"' in later


# --------------------------------------------------------------------------------------------
# Sanitising


class _Tags(HTMLParser):
    """Every start tag with its attributes, as a browser's parser would see them."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


def _tags(html: str) -> list[tuple[str, dict[str, str | None]]]:
    parser = _Tags()
    parser.feed(html)
    parser.close()
    return parser.tags


SAFE_HREF = re.compile(r"^(https?:|mailto:|#concept=|#folder=|#fn|#fnref)")


def test_hostile_markdown_renders_without_any_way_to_run(tmp_path: Path) -> None:
    snapshot = load_bundle(str(write_bundle(tmp_path / "h", HOSTILE)))[0]
    html = render_body(snapshot.concepts["evil"], snapshot)
    tags = _tags(html)
    names = {tag for tag, _ in tags}
    assert not names & {"script", "img", "iframe", "svg", "object", "embed", "style"}
    for tag, attrs in tags:
        for name, value in attrs.items():
            assert not name.startswith("on"), (tag, name)
            if name in ("href", "src", "action", "formaction"):
                assert tag == "a" and name == "href" and value and SAFE_HREF.match(value), \
                    (tag, name, value)
    hrefs = [attrs["href"] for tag, attrs in tags if tag == "a"]
    assert "#concept=target" in hrefs
    assert not [h for h in hrefs if h and "javascript" in h.lower()]
    # The raw HTML is there as text, escaped: a reader sees what the file says.
    assert "&lt;script&gt;window.__pwned = 'script'&lt;/script&gt;" in html
    spans = [attrs for tag, attrs in tags if tag == "span"]
    assert any(a.get("class") == "okf-unsafe" for a in spans)
    assert any(a.get("class") == "okf-image" for a in spans)


def test_each_kind_of_link_becomes_what_the_page_can_follow(tmp_path: Path) -> None:
    snapshot = load_bundle(str(write_bundle(tmp_path / "p", PROBLEMS)))[0]
    tags = _tags(render_body(snapshot.concepts["notes/a"], snapshot))
    by_text = {attrs.get("class"): attrs for _, attrs in tags if attrs.get("class")}
    assert by_text["okf-concept"]["href"] == "#concept=notes/b&at=no-such-heading"
    assert by_text["okf-concept"]["data-anchor"] == "no-such-heading"
    assert by_text["okf-folder"]["href"] == "#folder=notes"
    assert by_text["okf-asset"].get("href") is None
    assert by_text["okf-broken"].get("href") is None and "gone.md" in str(
        by_text["okf-broken"]["title"])
    assert by_text["okf-external"]["href"] == "mailto:a@example.com"
    beta = _tags(render_body(snapshot.concepts["notes/b"], snapshot))
    assert ("h2", {"id": "h-details"}) in beta


def test_the_data_block_cannot_end_its_script_element() -> None:
    value = {"t": "</script><!--<script>x</SCRIPT >\u2028 <\\/ &amp;", "n": [1, "<b>"]}
    text = json_for_script(value)
    assert json.loads(text) == value
    assert not re.search(r"</script|<!--|<script", text, re.IGNORECASE)


def test_inline_scripts_are_refused_when_they_could_break_out() -> None:
    check_inline_script("ok", "var a = '<!-->';")
    with pytest.raises(ValueError):
        check_inline_script("bad", "var a = '</script>';")
    with pytest.raises(ValueError):
        check_inline_script("bad", "var a = '<!--'; var b = '<script>';")


# --------------------------------------------------------------------------------------------
# The page


def _scripts(page: str) -> list[tuple[str, str]]:
    return re.findall(r"<script([^>]*)>(.*?)</script>", page, re.S)


def test_the_page_loads_nothing_and_its_policy_admits_only_its_own_scripts(
    example: Snapshot,
) -> None:
    page = build_page(example, ViewOptions(as_of=AS_OF, bundle_name="coffee-roastery"))
    (csp,) = re.findall(r'<meta http-equiv="Content-Security-Policy" content="([^"]+)"', page)
    directives = dict(d.strip().split(" ", 1) for d in csp.replace("&#x27;", "'").split(";"))
    assert directives["default-src"] == "'none'"
    assert directives["img-src"] == "data:"
    assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
    scripts = _scripts(page)
    assert len(scripts) == 2 + len(vendored())  # the data, the libraries, the app
    assert page.count("</script>") == len(scripts)
    (data_attrs, data_text), *code = scripts
    assert 'type="application/json"' in data_attrs
    assert json.loads(data_text)["meta"]["concepts"] == 34
    allowed = set(directives["script-src"].split())
    for attrs, text in code:
        assert attrs == ""
        digest = base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()
        assert f"'sha256-{digest}'" in allowed
    assert len(allowed) == len(code)
    (style,) = re.findall(r"<style[^>]*>(.*?)</style>", page, re.S)
    digest = base64.b64encode(hashlib.sha256(style.encode()).digest()).decode()
    assert directives["style-src"] == f"'sha256-{digest}'"
    # Nothing outside the data names anything to fetch (the icon is an empty data: URL).
    outside = page.replace(data_text, "")
    for _, text in code:
        outside = outside.replace(text, "")
    assert outside.count('<link rel="icon" href="data:,">') == 1
    outside = outside.replace('<link rel="icon" href="data:,">', "")
    assert not re.search(r"<(link|img|iframe|object|embed|base)\b|\bsrc=|\bhref=", outside,
                         re.I), outside
    assert "<title>coffee-roastery · bundle viewer</title>" in page


def test_hostile_frontmatter_stays_inside_the_data(tmp_path: Path) -> None:
    snapshot = load_bundle(str(write_bundle(tmp_path / "h", HOSTILE)))[0]
    page = build_page(snapshot, ViewOptions(as_of=AS_OF, bundle_name="h<script>x</script>"))
    scripts = _scripts(page)
    assert page.count("</script>") == len(scripts) == 2 + len(vendored())
    data = json.loads(scripts[0][1])
    evil = _concept(data, "evil")
    assert evil["title"].startswith("Evil </script><script>")
    assert "<title>h&lt;script&gt;x&lt;/script&gt; · bundle viewer</title>" in page


# --------------------------------------------------------------------------------------------
# The vendored libraries


def test_the_vendored_files_match_their_manifest() -> None:
    manifest = json.loads((VENDOR / "MANIFEST.json").read_text())
    listed = {"MANIFEST.json"}
    for package in manifest["packages"]:
        assert re.fullmatch(r"\d+\.\d+\.\d+", package["version"]), package
        assert package["licence"] and package["integrity"].startswith("sha512-")
        roles = [f["role"] for f in package["files"]]
        assert roles.count("script") == 1 and "licence" in roles
        for entry in package["files"]:
            data = (VENDOR / entry["file"]).read_bytes()
            assert hashlib.sha256(data).hexdigest() == entry["sha256"], entry["file"]
            assert len(data) == entry["bytes"]
            listed.add(entry["file"])
    # Nothing in vendor/ that the manifest does not account for.
    assert {p.name for p in VENDOR.iterdir()} == listed
    names = {lib.name: lib for lib in vendored()}
    assert set(names) == {"cytoscape", "dompurify"}
    assert names["cytoscape"].licence == "MIT"
    assert "Apache-2.0" in names["dompurify"].licence
    assert "Permission is hereby granted" in names["cytoscape"].licence_texts[0][1]


def test_a_changed_vendored_file_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                            ) -> None:
    from bundle_mcp.viewer import page as page_module

    copy = tmp_path / "viewer"
    (copy / "vendor").mkdir(parents=True)
    for item in VENDOR.iterdir():
        (copy / "vendor" / item.name).write_bytes(item.read_bytes())
    (copy / "vendor" / "purify.min.js").write_text("window.evil = 1;")
    monkeypatch.setattr(page_module.resources, "files", lambda _package: copy)
    with pytest.raises(VendorMismatch):
        vendored()


def test_the_page_lists_the_licences(example: Snapshot) -> None:
    page = build_page(example, ViewOptions(as_of=AS_OF))
    data = json.loads(_scripts(page)[0][1])
    libraries = {lib["name"]: lib for lib in data["licences"]}
    assert libraries["cytoscape"]["version"] == "3.35.0"
    assert [t["file"] for t in libraries["dompurify"]["texts"]] == [
        "dompurify.LICENSE.txt", "dompurify.LICENSE-MPL.txt"]


# --------------------------------------------------------------------------------------------
# The layout


def test_the_layout_places_every_concept_apart_inside_its_folder() -> None:
    triples = [(f"f{n % 7}/sub{n % 3}/c{n}" if n % 5 else f"top{n}", "", float(n % 11))
               for n in range(1000)]
    triples = [(i, i.rpartition("/")[0], w) for i, _, w in triples]
    layout = folder_layout(triples)
    assert len(layout.positions) == 1000
    points = sorted(layout.positions.values())
    assert len(set(points)) == 1000
    for concept_id, (x, y) in layout.positions.items():
        folder = concept_id.rpartition("/")[0]
        while folder:  # inside its folder's box, and every ancestor's
            bx, by, bw, bh = layout.boxes[folder]
            assert bx < x < bx + bw and by < y < by + bh, (concept_id, folder)
            folder = folder.rpartition("/")[0]
    # Neighbours on a spiral keep the spacing the layout promises (within rounding).
    same = [p for i, p in layout.positions.items() if i.startswith("f1/sub1/")]
    closest = min(((a[0] - b[0]) ** 2 + (a[1] - b[1]) ** 2) ** 0.5
                  for k, a in enumerate(same) for b in same[k + 1:])
    assert closest > NODE_GAP * 0.5
    assert folder_layout(triples) == layout  # no randomness


# --------------------------------------------------------------------------------------------
# The live server


def _get(url: str, host: str | None = None) -> tuple[int, dict[str, str], bytes]:
    parts = url.removeprefix("http://").rstrip("/")
    address, _, port = parts.rpartition(":")
    connection = http.client.HTTPConnection(address.strip("[]"), int(port), timeout=30)
    try:
        connection.request("GET", "/", headers={"Host": host} if host else {})
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        connection.close()


@pytest.fixture
def live(tmp_path: Path) -> Iterator[tuple[ViewServer, Path]]:
    root = write_bundle(tmp_path / "live", PROBLEMS)
    page = LivePage(str(root), lambda: ViewOptions(as_of=AS_OF, bundle_name="live"))
    server = ViewServer("127.0.0.1", 0, page)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server, root
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def test_the_server_serves_the_page_and_sees_an_edit_on_the_next_request(
    live: tuple[ViewServer, Path],
) -> None:
    server, root = live
    status, headers, body = _get(server.url)
    assert status == 200 and headers["Content-Type"] == "text/html; charset=utf-8"
    assert headers["Cache-Control"] == "no-store"
    assert b'"title":"Alpha"' in body
    assert _get(server.url)[2] is not body and _get(server.url)[2] == body
    path = root / "notes" / "a.md"
    path.write_text(path.read_text().replace("title: Alpha", "title: Alpha Edited"))
    assert b'"title":"Alpha Edited"' in _get(server.url)[2]
    (root / "notes" / "c.md").write_text("---\ntype: Note\ntitle: Gamma\n---\n# Gamma\n")
    assert b'"title":"Gamma"' in _get(server.url)[2]


def test_the_server_answers_only_to_a_loopback_host(live: tuple[ViewServer, Path]) -> None:
    server, _ = live
    port = server.server_address[1]
    for host in (f"localhost:{port}", f"127.0.0.1:{port}", "localhost"):
        assert _get(server.url, host)[0] == 200, host
    for host in ("evil.example", f"evil.example:{port}", "127.0.0.1:1", "[::1]x"):
        status, headers, body = _get(server.url, host)
        assert status == 421 and b"loopback" in body, host
        assert "default-src 'none'" in headers["Content-Security-Policy"]
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    connection.request("GET", "/other")
    assert connection.getresponse().status == 404
    connection.close()


def test_loopback_names() -> None:
    assert all(map(is_loopback, ["localhost", "127.0.0.1", "127.8.9.10", "::1", "LOCALHOST"]))
    assert not any(map(is_loopback, ["0.0.0.0", "::", "10.0.0.1", "example.com", ""]))


# --------------------------------------------------------------------------------------------
# The command line


def test_view_writes_the_page(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "page.html"
    assert main(["view", str(EXAMPLE), "-o", str(out), "--as-of", "2026-12-01"]) == 0
    page = out.read_text()
    assert '"as_of":"2026-12-01"' in page and '"bundle":"coffee-roastery"' in page
    assert f"wrote {out} (34 concepts, {out.stat().st_size:,} bytes)" in capsys.readouterr().err
    assert not list(tmp_path.glob(".bundle-view-*"))


def test_view_writes_to_standard_output(capfd: pytest.CaptureFixture[str]) -> None:
    assert main(["view", str(EXAMPLE), "-o", "-", "--as-of", "2026-12-01"]) == 0
    assert capfd.readouterr().out.startswith("<!DOCTYPE html>")


@pytest.mark.parametrize(("argv", "message"), [
    (["--serve", "0.0.0.0:0"], "loopback only"),
    (["--serve", "192.168.1.2:8000"], "loopback only"),
    (["--serve", "nonsense"], "HOST:PORT"),
    (["--as-of", "2026-02-31"], "YYYY-MM-DD"),
    (["--node-budget", "0"], "1 or more"),
    (["-o", "x.html", "--serve", "127.0.0.1:0"], "not both"),
])
def test_view_refuses_a_command_line_that_cannot_run(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["view", str(EXAMPLE), *argv]) == 2
    assert message in capsys.readouterr().err


def test_view_of_a_missing_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["view", str(tmp_path / "absent")]) == 2
    assert "not a folder" in capsys.readouterr().err


def test_view_serve_from_the_command_line_sees_an_edit(tmp_path: Path) -> None:
    """The real command, on port 0: the address it prints serves the page, and an edit to the
    bundle appears in the next response."""
    root = write_bundle(tmp_path / "cli", PROBLEMS)
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    process = subprocess.Popen(
        [sys.executable, "-m", "bundle_mcp.cli", "view", str(root), "--serve", "127.0.0.1:0",
         "--as-of", "2026-12-01"], stderr=subprocess.PIPE, text=True, env=env,
    )
    try:
        assert process.stderr is not None
        line = process.stderr.readline()
        match = re.search(r"on (http://127\.0\.0\.1:\d+/)", line)
        assert match, line
        url = match.group(1)
        assert b'"title":"Beta"' in _get(url)[2]
        path = root / "notes" / "b.md"
        path.write_text(path.read_text().replace("title: Beta", "title: Beta Two"))
        assert b'"title":"Beta Two"' in _get(url)[2]
    finally:
        process.terminate()
        process.wait(timeout=30)
