"""One tool call timed on two source trees alternated in the same run (a shared machine drifts).

For each round and each tree (``NAME=PATH/src``), a stdio server on ``BUNDLE`` with its own fresh
cache folder: once warm, the first call and the median of ``--warm`` calls, and the peak RSS;
then a restart on that cache folder: the first call before the warm-up is done, the first call
once warm, and the warm median again. It prints each session's figures and how many distinct
answer texts the trees gave (1: byte-identical answers).

    .venv/bin/python bench/alternate.py /work/bench10k main=/work/main/src branch=src \\
        --tool search_concepts --arguments '{"query": "zq09977", "limit": 20}'
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from targets import Session  # noqa: E402  (a sibling script)

FIGURES = ("ready_s", "first_ms", "warm_ms", "rss_mib", "restart_first_unready_ms",
           "restart_ready_s", "restart_first_ms", "restart_warm_ms")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("bundle")
    parser.add_argument("trees", nargs="+", help="NAME=SRC_FOLDER, alternated in this order")
    parser.add_argument("--tool", default="search_concepts")
    parser.add_argument("--arguments", default='{"query": "zq09977", "limit": 20}')
    parser.add_argument("--warm", type=int, default=21)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    trees = dict(t.split("=", 1) for t in args.trees)
    arguments = json.loads(args.arguments)
    figures: dict[str, dict[str, list[float]]] = {n: {f: [] for f in FIGURES} for n in trees}
    answers: set[str] = set()
    work = tempfile.mkdtemp(prefix="alternate-")

    def call(session: Session) -> float:
        seconds, line = session.call(args.tool, arguments)
        answers.add(json.loads(line)["result"]["content"][0]["text"])
        return seconds * 1000

    try:
        for round_ in range(args.rounds):
            for name, src in trees.items():
                os.environ["PYTHONPATH"] = str(Path(src).resolve())
                cache = os.path.join(work, f"{name}-{round_}")
                os.mkdir(cache)
                row = figures[name]
                for restart in (False, True):
                    session = Session(args.bundle, cache, work)
                    session.start()
                    try:
                        prefix = "restart_" if restart else ""
                        if restart:
                            row["restart_first_unready_ms"].append(call(session))
                        row[f"{prefix}ready_s"].append(session.wait_ready())
                        row[f"{prefix}first_ms"].append(call(session))
                        row[f"{prefix}warm_ms"].append(
                            statistics.median(call(session) for _ in range(args.warm)))
                        if not restart:
                            row["rss_mib"].append(session.peak_rss_mib())
                    finally:
                        session.stop()
                print(round_, name, {f: round(v[-1], 2) for f, v in row.items()}, flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("distinct answer texts over every tree:", len(answers))
    for name, row in figures.items():
        print(name, {f: [round(v, 2) for v in values] for f, values in row.items()})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
