"""In-process call times after the warm-up: search_concepts, search_sections and context.

Builds the dispatcher as a server does, runs every warm-up step, then times each call through
``Dispatcher.call`` in CPU milliseconds of the process (less swayed than wall time by the other
work of a shared machine): the first call and the median of the next ten, and for
search_sections a first query of each of several words (its postings are computed, unless the
parse cache already keeps them: give a copy of a cache folder no search_sections call has
used). Prints the RSS after the warm-up and a digest of every answer (the same digest on two
source trees: the same answers). Alternate two trees on the same machine:

    PYTHONPATH=/work/main/src .venv/bin/python bench/warm_calls.py BUNDLE CACHE_COPY_A
    PYTHONPATH=src .venv/bin/python bench/warm_calls.py BUNDLE CACHE_COPY_B
"""

from __future__ import annotations

import gc
import hashlib
import os
import statistics
import sys
import time
from typing import Any

SEARCHES = (
    ("search_concepts rare", {"query": "zq09977", "limit": 20}),
    ("search_concepts common word", {"query": "latency", "limit": 20}),
    ("search_concepts commonest word", {"query": "the", "limit": 20}),
    ("search_concepts two letters", {"query": "ca", "limit": 20}),
    ("search_concepts two common words", {"query": "Config stable", "limit": 20}),
)
NEW_TERMS = ("pipeline latency", "throughput", "archive summarises", "zq09977", "margin",
             "incident", "freshness", "endpoint growth")


def _rss_mib() -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) // 1024
    return 0


def main() -> int:
    bundle, cache = sys.argv[1], sys.argv[2]
    os.environ["BUNDLE_MCP_CACHE_DIR"] = cache
    from bundle_mcp import readiness
    from bundle_mcp.cancel import CancelToken
    from bundle_mcp.dispatch import Dispatcher
    from bundle_mcp.readers import ALL_READER
    from bundle_mcp.serve_config import ServeConfig

    dispatcher = Dispatcher(ServeConfig(bundles=(bundle,)))
    token = CancelToken()
    view = dispatcher.served_snapshot(bundle, token, ALL_READER)
    for step in readiness.warm_steps(dispatcher, bundle, ALL_READER, view):
        step.build(token)
    gc.collect()
    print("RSS after the warm-up (MiB):", _rss_mib())
    digest = hashlib.sha256()

    def call(name: str, arguments: dict[str, Any]) -> float:
        started = time.process_time()
        outcome = dispatcher.call(name, {"bundle_path": bundle, **arguments}, CancelToken(),
                                  ALL_READER)
        spent = (time.process_time() - started) * 1000
        digest.update(repr(outcome).encode())
        return spent

    def timed(label: str, name: str, arguments: dict[str, Any]) -> None:
        first = call(name, arguments)
        warm = statistics.median(call(name, arguments) for _ in range(10))
        print(f"{label:40s} first {first:7.1f} ms  warm median {warm:7.1f} ms")

    for label, arguments in SEARCHES:
        timed(label, "search_concepts", arguments)
    firsts = [f"{term}={call('search_sections', {'query': term}):.1f}" for term in NEW_TERMS]
    print("search_sections, first query of each (ms):", ", ".join(firsts))
    timed("search_sections repeated", "search_sections", {"query": "pipeline latency"})
    timed("context", "context", {"question": "how is pipeline latency measured"})
    print("answers digest:", digest.hexdigest()[:16])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
