"""The viewer page in a real browser: Debian's headless Chromium, driven by Playwright for
Python over the DevTools protocol.

Each page is opened from ``file://`` in a context with the network switched off, a host resolver
that resolves nothing, and a route that aborts (and records) any request that is not the page
itself; a DevTools ``Network`` listener records every request the page sends, and the test fails
on any but the page's own. Console errors, uncaught exceptions, Content-Security-Policy
violations and dialogs fail it too. Screenshots go to ``test-artifacts/viewer/`` (or
``$BUNDLE_MCP_TEST_ARTIFACTS/viewer/``).

Skipped, saying why, without /usr/bin/chromium (``apt-get install -y chromium``; .ci/run installs
it) or without Playwright (the dev extra). Playwright never downloads a browser here: it is
pointed at Debian's.
"""

from __future__ import annotations

import datetime as dt
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from bundle_mcp.loader import load_bundle
from bundle_mcp.okf.names import concept_name
from bundle_mcp.viewer import ViewOptions, build_page
from bundle_mcp.viewer.serve import LivePage, ViewServer

try:
    from tests.viewer_bundles import EXAMPLE, HOSTILE, REPO, generated_bundle, write_bundle
except ImportError:  # pytest run without the repository root on sys.path
    from viewer_bundles import (  # type: ignore[no-redef,import-not-found]
        EXAMPLE,
        HOSTILE,
        REPO,
        generated_bundle,
        write_bundle,
    )

CHROMIUM = Path("/usr/bin/chromium")
if not CHROMIUM.exists():
    pytest.skip("Debian's chromium is not installed at /usr/bin/chromium "
                "(apt-get install -y chromium; .ci/run installs it)", allow_module_level=True)
sync_api = pytest.importorskip(
    "playwright.sync_api",
    reason="Playwright for Python comes with the dev extra: pip install -e '.[dev]'")

AS_OF = dt.date(2026, 12, 1)
ARTIFACTS = Path(os.environ.get("BUNDLE_MCP_TEST_ARTIFACTS", REPO / "test-artifacts")) / "viewer"
# The flags a root user's headless Chromium needs on a closed network (no background fetches,
# no component updates, no QUIC), plus a resolver that resolves no name (127.0.0.1 stays
# reachable for the --serve test; every request is recorded and checked anyway).
FLAGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
]
# Recorded by the page before its own scripts run (an init script runs outside the page's
# Content-Security-Policy): every policy violation the page would otherwise only log.
WATCH_VIOLATIONS = """
window.__violations = [];
document.addEventListener('securitypolicyviolation', function (e) {
  window.__violations.push(e.violatedDirective + ' ' + e.blockedURI);
});
"""


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True,
                                              args=FLAGS)
        try:
            yield launched
        finally:
            launched.close()


@dataclass
class Opened:
    """One page and everything it did that a test may object to."""

    page: Any
    url: str
    requests: list[str] = field(default_factory=list)  # every request the page sent (DevTools)
    routed: list[str] = field(default_factory=list)  # requests the route aborted
    errors: list[str] = field(default_factory=list)  # console errors and uncaught exceptions
    dialogs: list[str] = field(default_factory=list)

    def assert_clean(self) -> None:
        assert [r for r in self.requests if r != self.url] == [], "a request left the page"
        assert self.routed == []
        assert self.errors == []
        assert self.dialogs == []
        assert self.page.evaluate("window.__violations") == []

    def select_by_search(self, text: str) -> None:
        """Search, press Enter, and wait until the selection has moved to a new concept.

        Enter sets the location hash and the page selects on ``hashchange``, a later task: a
        test that only waited for a visible pane would read the previous concept's pane.
        """
        before = self.page.evaluate("okfViewer.selected()")
        self.page.fill("#okfv-search", text)
        self.page.keyboard.press("Enter")
        self.page.wait_for_function(
            "before => okfViewer.selected() !== null && okfViewer.selected() !== before"
            " && document.querySelector('#okfv-detail').hidden === false", arg=before)

    def shot(self, name: str) -> Path:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        path = ARTIFACTS / name
        self.page.screenshot(path=str(path))
        return path


def _open(browser: Any, html: Path | str, width: int = 1280, height: int = 800) -> Opened:
    """Open a page file (or, for --serve, an http://127.0.0.1 address) and wait until drawn."""
    url = html if isinstance(html, str) else html.resolve().as_uri()
    context = browser.new_context(viewport={"width": width, "height": height},
                                  offline=url.startswith("file:"), service_workers="block")
    page = context.new_page()
    opened = Opened(page, url)

    def route(request_route: Any) -> None:
        url = request_route.request.url
        if url == opened.url:
            request_route.continue_()
        else:
            opened.routed.append(url)
            request_route.abort()

    context.route("**/*", route)
    devtools = context.new_cdp_session(page)
    devtools.send("Network.enable")
    devtools.on("Network.requestWillBeSent", lambda event: opened.requests.append(
        event["request"]["url"]))
    page.on("console", lambda m: opened.errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda exc: opened.errors.append(f"uncaught: {exc}"))

    def dialog(d: Any) -> None:
        opened.dialogs.append(d.message)
        d.dismiss()

    page.on("dialog", dialog)
    page.add_init_script(WATCH_VIOLATIONS)
    page.goto(opened.url)
    # Predicates as functions: an expression string would be eval'd in the page, which its
    # Content-Security-Policy refuses (and reports as a violation).
    page.wait_for_function("() => window.okfViewer && window.okfViewer.ready", timeout=60_000)
    # Ready means drawn: wait for two frames after the script finished.
    page.evaluate("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
    return opened


def _page_file(folder: Path, bundle: Path, name: str, **options: Any) -> tuple[Path, int]:
    snapshot = load_bundle(str(bundle))[0]
    path = folder / f"{name}.html"
    path.write_text(build_page(snapshot, ViewOptions(as_of=AS_OF, bundle_name=bundle.name,
                                                     **options)), encoding="utf-8")
    return path, len(snapshot.concepts)


def _pane(opened: Opened) -> str:
    # textContent, not innerText: the cards' headings are upper-cased by the style sheet.
    return str(opened.page.text_content("#okfv-detail"))


# --------------------------------------------------------------------------------------------


def test_the_example_bundle(browser: Any, tmp_path: Path) -> None:
    html, concepts = _page_file(tmp_path, EXAMPLE, "coffee-roastery")
    opened = _open(browser, html)
    page = opened.page
    assert page.evaluate("okfViewer.nodeCount()") == concepts == 34
    assert page.evaluate("okfViewer.budgetMode") is False
    assert "34 concepts" in page.inner_text("#okfv-status")
    assert "as of 2026-12-01" in page.inner_text("#okfv-status")
    opened.shot("coffee-roastery-bundle.png")

    opened.select_by_search("Ethiopia Guji Hambela Natural")
    assert page.evaluate("okfViewer.selected()") == "beans/ethiopia-guji"
    pane = _pane(opened)
    assert "Ethiopia Guji Hambela Natural" in pane
    assert "trust human-reviewed" in pane
    assert "staleness stale" in pane and "stale since 2026-09-01" in pane
    assert "Links out" in pane and "Sources (2)" in pane
    assert page.evaluate("location.hash") == "#concept=beans/ethiopia-guji"
    opened.shot("coffee-roastery-concept.png")

    # A link in the body selects its concept; the Attested Computation card is there.
    page.click("#okfv-detail a[data-concept='roast-profiles/guji-filter-v2']")
    page.wait_for_function("() => okfViewer.selected() === 'roast-profiles/guji-filter-v2'")
    opened.select_by_search("landed cost")
    assert page.evaluate("okfViewer.selected()") == "pricing/landed-cost"
    pane = _pane(opened)
    assert "Attested computation" in pane and "python3.12" in pane
    assert "run_id, code_sha256, result" in pane
    opened.assert_clean()


def test_the_keyboard_filters_and_colours(browser: Any, tmp_path: Path) -> None:
    html, _ = _page_file(tmp_path, EXAMPLE, "coffee-roastery")
    opened = _open(browser, html)
    page = opened.page
    page.keyboard.press("/")
    assert page.evaluate("document.activeElement.id") == "okfv-search"
    page.keyboard.type("guji filter")
    results = page.locator("#okfv-results li")
    assert results.count() >= 2
    second = page.inner_text("#okfv-results li:nth-child(2) .okfv-rid")
    page.keyboard.press("ArrowDown")
    page.keyboard.press("Enter")
    page.wait_for_function(f"() => okfViewer.selected() === {second!r}")
    page.locator("body").click(position={"x": 900, "y": 700})  # off the input
    page.keyboard.press("j")
    page.wait_for_function(f"() => okfViewer.selected() !== {second!r}")
    page.keyboard.press("Escape")
    assert page.evaluate("okfViewer.selected()") is None
    # Filters: hide one type, then only orphans (the example has none).
    page.click("#okfv-filters summary")
    page.uncheck("#okfv-filter-body fieldset:nth-of-type(1) input >> nth=0")
    assert page.evaluate("okfViewer.visibleCount()") == 34 - 5
    page.select_option("#okfv-orphans", "only")
    assert page.evaluate("okfViewer.visibleCount()") == 0
    page.select_option("#okfv-orphans", "all")
    page.select_option("#okfv-colour-by", "trust")
    assert "human-reviewed" in page.inner_text("#okfv-legend")
    page.evaluate("document.activeElement.blur()")  # keys typed into a select stay there
    page.keyboard.press("?")
    assert page.evaluate("document.querySelector('#okfv-about').open") is True
    about = page.inner_text("#okfv-about")
    assert "cytoscape 3.35.0" in about and "MIT" in about and "dompurify" in about
    page.keyboard.press("Escape")
    opened.assert_clean()


def test_a_narrow_window(browser: Any, tmp_path: Path) -> None:
    html, _ = _page_file(tmp_path, EXAMPLE, "coffee-roastery")
    opened = _open(browser, html, width=420, height=800)
    page = opened.page
    opened.select_by_search("Probat P12")
    assert "trust" in _pane(opened)
    assert page.evaluate("document.documentElement.scrollWidth") <= 420
    box = page.locator("#okfv-pane").bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 421
    page.evaluate("window.scrollTo(0, 0)")
    opened.shot("coffee-roastery-narrow.png")
    opened.assert_clean()


def test_the_node_budget(browser: Any, tmp_path: Path) -> None:
    html, _ = _page_file(tmp_path, EXAMPLE, "budget", node_budget=10)
    opened = _open(browser, html)
    page = opened.page
    assert page.evaluate("okfViewer.budgetMode") is True
    assert page.evaluate("okfViewer.nodeCount()") == 0
    assert "showing 0 of 34 concepts (node budget 10)" in page.inner_text("#okfv-status")
    page.evaluate("void okfViewer.cy.getElementById('f:beans').emit('tap')")
    assert page.evaluate("okfViewer.nodeCount()") == 5
    opened.select_by_search("Landed Cost per Roasted Kilogram")
    assert page.evaluate("okfViewer.selected()") == "pricing/landed-cost"
    assert page.evaluate("okfViewer.cy.getElementById('c' + okfViewer.cy.nodes('.concept')"
                         ".filter(n => n.data('label').startsWith('Landed')).data('ci'))"
                         ".nonempty()")
    assert page.evaluate("okfViewer.nodeCount()") <= 10
    opened.shot("coffee-roastery-budget.png")
    opened.assert_clean()


_BACK_TO_EVIL = """() => {
    if (okfViewer.selected() === 'evil') return true;
    if (location.hash === '#concept=evil') history.replaceState(null, '', location.pathname);
    location.hash = '#concept=evil';
    return false;
}"""


def _press_on_evil(page: Any, selector: str, k: int, tries: int = 3) -> None:
    """Hover over and click the ``k``-th match of ``selector`` on the hostile concept's pane.

    Back to the hostile concept first, however the last click left the page: a history step
    it started may land after this (so each poll asks again), and a hash that already names
    the concept fires no hashchange (so it is cleared first). Such a late step can also
    re-render the pane between finding the element and pointing at it, which left one CI
    run's hover waiting 30 s for an element that was gone: each try is bounded, and a try
    that times out starts again from the hostile concept."""
    for attempt in range(tries):
        page.wait_for_function(_BACK_TO_EVIL)
        target = page.locator(selector).nth(k)
        if not target.count():
            return
        try:
            target.hover(timeout=5_000)
            target.click(timeout=5_000)
            return
        except sync_api.TimeoutError:
            if attempt == tries - 1:
                raise


def test_hostile_content_never_runs(browser: Any, tmp_path: Path) -> None:
    bundle = write_bundle(tmp_path / "hostile", HOSTILE)
    html, _ = _page_file(tmp_path, bundle, "hostile")
    opened = _open(browser, html)
    page = opened.page
    opened.select_by_search("Evil")
    pane = _pane(opened)
    assert "<script>window.__pwned = 'script'</script>" in pane  # shown as text
    assert page.locator("#okfv-detail script, #okfv-detail img, #okfv-detail iframe, "
                        "#okfv-detail svg").count() == 0
    # Follow every link and press every button the pane offers (not the external ones: a new
    # tab is no script of the bundle, and the route would abort it anyway).
    for selector in ("#okfv-detail a:not([target])", "#okfv-detail button"):
        for k in range(page.locator(selector).count()):
            _press_on_evil(page, selector, k)
    page.evaluate("location.hash = '#concept=evil'")
    page.wait_for_function("() => okfViewer.selected() === 'evil'")
    page.click("#okfv-about-open")
    page.keyboard.press("Escape")
    opened.shot("hostile-concept.png")
    assert page.evaluate("typeof window.__pwned") == "undefined"
    opened.assert_clean()


def test_the_served_page(browser: Any, tmp_path: Path) -> None:
    """--serve: the same page over HTTP on loopback, and the browser asks for nothing else
    (not even /favicon.ico)."""
    page_maker = LivePage(str(EXAMPLE), lambda: ViewOptions(as_of=AS_OF, bundle_name="served"))
    server = ViewServer("127.0.0.1", 0, page_maker)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        opened = _open(browser, server.url)
        assert opened.page.evaluate("okfViewer.nodeCount()") == 34
        opened.select_by_search("Quakers")
        assert "Quakers" in _pane(opened)
        opened.assert_clean()
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@dataclass(frozen=True)
class Thousand:
    html: Path
    concepts: int
    hub: str
    picked: tuple[str, str]  # (ID, title) of the concept the test searches for


@pytest.fixture(scope="module")
def thousand(tmp_path_factory: pytest.TempPathFactory) -> Thousand:
    root, stats = generated_bundle(tmp_path_factory.mktemp("thousand") / "b1000", 1000)
    snapshot = load_bundle(str(root))[0]
    html = root.parent / "thousand.html"
    html.write_text(build_page(snapshot, ViewOptions(as_of=AS_OF, bundle_name="b1000")),
                    encoding="utf-8")
    picked = list(snapshot.concepts)[500]
    return Thousand(html, len(snapshot.concepts), stats["hub"],
                    (picked, concept_name(snapshot.concepts[picked])))


def test_a_generated_thousand_concept_bundle(browser: Any, thousand: Thousand) -> None:
    opened = _open(browser, thousand.html)
    page = opened.page
    # No clock is judged here (a shared CI machine drifts): _open's 60 s wait bounds the load;
    # `python scripts/viewer_screenshots.py --bundle B` prints a page's first frame.
    assert page.evaluate("okfViewer.nodeCount()") == thousand.concepts == 1000
    assert page.evaluate("okfViewer.budgetMode") is False
    opened.shot("thousand-bundle.png")
    concept_id, title = thousand.picked
    opened.select_by_search(title)
    assert page.evaluate("okfViewer.selected()") == concept_id
    pane = _pane(opened)
    assert title in pane and "trust " in pane
    opened.select_by_search(thousand.hub)
    assert page.evaluate("okfViewer.selected()") == thousand.hub
    opened.shot("thousand-concept.png")
    opened.assert_clean()
