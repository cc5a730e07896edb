"""search_sections' postings of new terms: from the parse cache's FTS5 table against the scan.

A measurement of ``loader/section_rows.py`` as the server uses it. It loads ``BUNDLE`` into a
fresh parse cache of its own (a temporary folder; ``--cache FOLDER`` starts from a copy of a
filled one instead), runs the warm-up's steps, its save and the step after it that writes every
section's words into the FTS5 table, and prints how long that step took and the database's
size. Then, for each term, it times the postings from the table (the terms no earlier query
asked) and the same postings from a read of every document, and says whether the two agree.

    PYTHONPATH=src .venv/bin/python bench/section_postings_fts.py /work/bench10k \\
        --terms retry policy the ledger zq09977
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("bundle")
    parser.add_argument("--terms", nargs="+", default=["retry", "policy", "the", "zq09977"])
    parser.add_argument("--cache", help="a filled cache folder to start from (copied)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="fts-") as folder:
        cache = Path(folder) / "cache"
        if args.cache:
            shutil.copytree(args.cache, cache)
        os.environ["BUNDLE_MCP_CACHE_DIR"] = str(cache)
        measure(args.bundle, args.terms, cache)
    return 0


def measure(bundle: str, terms: list[str], cache: Path) -> None:
    # Imported once the cache folder is set: the dispatcher's parse cache reads it.
    from bundle_mcp.cancel import CancelToken
    from bundle_mcp.dispatch import Dispatcher
    from bundle_mcp.limits import DEFAULT_CAPS
    from bundle_mcp.readers import ALL_READER
    from bundle_mcp.readiness import saved_steps, warm_steps
    from bundle_mcp.serve_config import ServeConfig
    from bundle_mcp.tools import _section_index as sections

    token = CancelToken()
    dispatcher = Dispatcher(ServeConfig(bundles=(bundle,), caps=DEFAULT_CAPS))
    snapshot = dispatcher.served_snapshot(bundle, token, ALL_READER)
    for step in warm_steps(dispatcher, bundle, ALL_READER, snapshot):
        step.build(token)
    dispatcher.save_parse_cache(bundle, snapshot)
    started = time.perf_counter()
    for step in saved_steps(snapshot):
        step.build(token)
    size = sum(path.stat().st_size for path in (cache / "parse").glob("*.sqlite3*"))
    print(f"section words written after the save: {time.perf_counter() - started:.1f} s; "
          f"parse cache {size / 2**20:.0f} MiB")
    for term in terms:
        started = time.perf_counter()
        kept = sections._postings(snapshot, [term], token)[term]
        kept_s = time.perf_counter() - started
        started = time.perf_counter()
        read = sections._postings(snapshot, [term], token, use_kept=False)[term]
        read_s = time.perf_counter() - started
        same = (kept.concepts, kept.sections, kept.tf) == (read.concepts, read.sections, read.tf)
        print(f"{term}: {len(kept)} sections; from the table {kept_s * 1000:.0f} ms, reading "
              f"the documents {read_s * 1000:.0f} ms; the same postings: {same}")


if __name__ == "__main__":
    sys.exit(main())
