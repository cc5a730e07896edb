#!/usr/bin/env python3
"""The viewer screenshots in docs/ (``make viewer-screenshots``).

Makes the page of ``examples/coffee-roastery`` with the date fixed, opens it from ``file://`` in
Debian's headless Chromium (Playwright for Python, pointed at /usr/bin/chromium, with the network
off) at 1280×800, and saves ``docs/viewer-bundle.png`` (the whole bundle) and
``docs/viewer-concept.png`` (one concept, chosen through the search box as a reader would).
It prints the page's size and its first frame: seconds from opening it until drawn.

    python scripts/viewer_screenshots.py [--as-of 2026-12-01] [--concept "Landed Cost ..."]
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))

from bundle_mcp.loader import load_bundle  # noqa: E402 - after the path above
from bundle_mcp.viewer import ViewOptions, build_page  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
FLAGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--host-resolver-rules=MAP * ~NOTFOUND",
]
SETTLE_MS = 600  # Cytoscape sharpens its cached label textures a moment after a zoom


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bundle", default=str(REPO / "examples" / "coffee-roastery"))
    parser.add_argument("--as-of", default="2026-12-01")
    parser.add_argument("--concept", default="Landed Cost per Roasted Kilogram",
                        help="the title typed into the search box")
    parser.add_argument("--out", default=str(REPO / "docs"))
    args = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright

    bundle = Path(args.bundle).resolve()
    snapshot = load_bundle(str(bundle))[0]
    page_text = build_page(snapshot, ViewOptions(as_of=dt.date.fromisoformat(args.as_of),
                                                 bundle_name=bundle.name))
    out = Path(args.out)
    with tempfile.TemporaryDirectory(prefix="viewer-shots-") as tmp:
        html = Path(tmp) / f"{bundle.name}.html"
        html.write_text(page_text, encoding="utf-8")
        print(f"page: {len(page_text.encode()):,} bytes for {len(snapshot.concepts)} concepts")
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True,
                                                 args=FLAGS)
            context = browser.new_context(viewport={"width": 1280, "height": 800},
                                          offline=True)
            page = context.new_page()
            started = time.monotonic()
            page.goto(html.as_uri())
            page.wait_for_function("() => window.okfViewer && window.okfViewer.ready",
                                   timeout=120_000)
            # Drawn: two frames after the page's script said it was ready.
            page.evaluate("new Promise(r => requestAnimationFrame(() => "
                          "requestAnimationFrame(r)))")
            print(f"first frame: {time.monotonic() - started:.2f} s")
            page.wait_for_timeout(SETTLE_MS)
            page.screenshot(path=str(out / "viewer-bundle.png"))
            page.fill("#okfv-search", args.concept)
            page.keyboard.press("Enter")
            page.wait_for_function("() => okfViewer.selected() !== null")
            page.evaluate("document.activeElement.blur()")
            page.wait_for_timeout(SETTLE_MS)
            page.screenshot(path=str(out / "viewer-concept.png"))
            print(f"selected: {page.evaluate('okfViewer.selected()')}")
            browser.close()
    for name in ("viewer-bundle.png", "viewer-concept.png"):
        print(f"wrote {out / name} ({(out / name).stat().st_size:,} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
