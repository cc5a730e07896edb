"""What a reader's view costs: its build, and each reader's first and repeated calls.

    python bench/reader_views.py BUNDLE --read FOLDER [--read FOLDER ...] [--runs N] [--warm]

Loads BUNDLE once (every document parsed and its Markdown read, as the warm-up would), then
builds the view of a reader that reads the given folder patterns, and times three read tools
for the all-reading reader and for that reader: the first call (which builds the reader's
indexes) and the median of ``--runs`` repeats. ``--warm``: first run the serving warm-up
(bundle_mcp.readiness) for both scopes, as ``serve --readers`` does, so "first" is what a
reader's first call costs on a ready server. A figure to read, never a test
(bench/README.md). On ``corpora/cpp-docs`` (9,746 files) with ``--read cpp --read
c-runtime-library`` the view is built in about 11 ms.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from bundle_mcp.cancel import CancelToken
from bundle_mcp.dispatch import Dispatcher, ServeConfig
from bundle_mcp.loader.views import reader_view
from bundle_mcp.okf.scopes import NOTHING, Access, FolderScope
from bundle_mcp.readers import ALL_READER, Reader
from bundle_mcp.readiness import Readiness

CALLS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("list_concepts", {}),
    ("search_concepts", {"query": "template class"}),
    ("bundle_summary", {}),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("bundle")
    parser.add_argument("--read", action="append", required=True, metavar="PATTERN")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--warm", action="store_true",
                        help="run the serving warm-up for both readers before timing")
    args = parser.parse_args()
    dispatcher = Dispatcher(ServeConfig(bundles=(args.bundle,), skip_unparseable=True))
    if args.warm:
        scope = FolderScope.of(args.read)
        readiness = Readiness(dispatcher, scopes=lambda: (ALL_READER.access.read, scope),
                              follow=False)
        started = time.perf_counter()
        readiness.start()
        readiness.wait()
        readiness.stop()
        print(f"warm-up of both views: {time.perf_counter() - started:.2f} s")
    started = time.perf_counter()
    snapshot = dispatcher.served_snapshot(args.bundle, CancelToken())
    for doc in snapshot.concepts.values():
        doc.markdown  # noqa: B018 - parse every body now, as the warm-up does
    print(f"load and parse: {time.perf_counter() - started:.2f} s, "
          f"{len(snapshot.documents)} files")
    scope = FolderScope.of(args.read)
    started = time.perf_counter()
    view = reader_view(snapshot, scope)
    print(f"view of {', '.join(scope.patterns)}: {(time.perf_counter() - started) * 1000:.1f} ms, "
          f"{len(view.concepts)} of {len(snapshot.concepts)} concepts")
    reader = Reader("bench", Access(scope, NOTHING))
    for name, arguments in CALLS:
        for who in (ALL_READER, reader):
            started = time.perf_counter()
            dispatcher.call(name, arguments, None, who)
            first = time.perf_counter() - started
            repeats = []
            for _ in range(args.runs):
                started = time.perf_counter()
                dispatcher.call(name, arguments, None, who)
                repeats.append(time.perf_counter() - started)
            print(f"{name:16} {who.name:5} first {first * 1000:8.1f} ms   "
                  f"median of {args.runs} {statistics.median(repeats) * 1000:7.2f} ms")


if __name__ == "__main__":
    main()
