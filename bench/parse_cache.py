"""The persistent parse cache's costs on one bundle: the first save, reading it back, a restart's
load from it, and the save after one edit (median of ``--runs``, each in a fresh cache folder).

    .venv/bin/python bench/generate.py /tmp/b10k --concepts 9978
    .venv/bin/python bench/parse_cache.py /tmp/b10k --runs 3

Run it with ``PYTHONPATH=<another checkout>/src`` to measure that checkout's cache side by side.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from bundle_mcp.loader import load_bundle
from bundle_mcp.loader.parse_cache import ParseCache


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bundle", help="absolute path of the bundle")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    bundle = args.bundle
    snapshot, _ = load_bundle(bundle)
    for doc in snapshot.documents.values():
        assert doc.markdown is not None  # every file's facts, as after the warm-up
    samples: dict[str, list[float]] = {
        "first save": [], "read back": [], "restart load": [], "save after one edit": []}
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory() as folder:
            cache = ParseCache(Path(folder))
            start = time.perf_counter()
            cache.save(bundle, snapshot.documents)
            samples["first save"].append(time.perf_counter() - start)
            start = time.perf_counter()
            entries = cache.load(bundle)
            samples["read back"].append(time.perf_counter() - start)
            start = time.perf_counter()
            load_bundle(bundle, cached=entries)
            samples["restart load"].append(time.perf_counter() - start)
            edited = dict(snapshot.documents)
            edited.popitem()  # one file fewer: what the cache holds changes by one row
            start = time.perf_counter()
            cache.save(bundle, edited)
            samples["save after one edit"].append(time.perf_counter() - start)
    print(f"{len(snapshot.documents)} documents, median of {args.runs}:")
    for name, values in samples.items():
        print(f"  {name}: {statistics.median(values):.3f} s")


if __name__ == "__main__":
    main()
