"""Latency of the first call after one file was edited, server-side over stdio.

Starts ``bundle-mcp serve BUNDLE``, warms ``read_concept``, then five times appends a line to a
different concept file, times the next ``read_concept`` (raw JSON-RPC, no SDK client), and
restores the file. The bundle is modified while it runs: use a generated copy.

    .venv/bin/python bench/edit_latency.py /tmp/b10k core/hub
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from raw_stdio import RawServer  # noqa: E402 - a sibling script, not a package


def main() -> int:
    bundle, concept_id = os.path.abspath(sys.argv[1]), sys.argv[2]
    server = RawServer(bundle, cache_dir=tempfile.mkdtemp(prefix="edit-bench-"))
    arguments = {"concept_id": concept_id}
    try:
        for _ in range(3):
            server.call("read_concept", arguments)
        time.sleep(3)  # let the first background parse-cache write finish
        files = sorted(
            os.path.join(root, name)
            for root, _, names in os.walk(bundle)
            for name in names
            if name.endswith(".md") and name not in ("index.md", "log.md")
        )[200:205]
        samples = []
        for path in files:
            with open(path, encoding="utf-8") as handle:
                original = handle.read()
            with open(path, "a", encoding="utf-8") as handle:
                handle.write("\nedited line\n")
            samples.append(server.call("read_concept", arguments)[0])
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(original)
            server.call("read_concept", arguments)
    finally:
        server.close()
    print("edited read_concept ms:", [round(s * 1000, 1) for s in samples],
          "median", round(statistics.median(samples) * 1000, 1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
