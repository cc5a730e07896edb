"""Time the frontmatter loaders on every frontmatter block under some folders.

Why the compiled path: docs/decisions/loading.md (Frontmatter parsing).

    python bench/yaml_loaders.py /tmp/b10k ../shared/corpora

Each row loads every block once per run; the figure is the median of three runs in this process,
alternated. ``reference`` is the strict loader (libyaml), ``chosen`` what the loader uses
(yaml-rs where it answers, else the reference), ``declined`` how many blocks went to the
reference.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bundle_mcp.loader.frontmatter import FrontmatterError, split_frontmatter
from bundle_mcp.loader.strict_yaml import load_yaml
from bundle_mcp.loader.yaml_fast import load_yaml_fast
from bundle_mcp.loader.yaml_load import load_frontmatter


def blocks(root: Path) -> list[str]:
    out = []
    for dirpath, _, files in os.walk(root):
        for name in sorted(files):
            if name.endswith(".md"):
                try:
                    split = split_frontmatter(Path(dirpath, name).read_bytes().decode("utf-8"))
                except (UnicodeDecodeError, FrontmatterError):
                    continue
                if split.raw is not None:
                    out.append(split.raw)
    return out


def loading(load: Callable[[str, int], Any]) -> Callable[[str], object]:
    def run(raw: str) -> object:
        try:
            return load(raw, 1)
        except FrontmatterError as exc:
            return exc.code
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", type=Path)
    args = parser.parse_args()
    rows = {"reference": loading(load_yaml), "chosen": loading(load_frontmatter)}
    for folder in args.folders:
        found = blocks(folder)
        declined = sum(1 for raw in found if load_yaml_fast(raw) is None)
        times: dict[str, list[float]] = {name: [] for name in rows}
        for _ in range(3):
            for name, load in rows.items():
                start = time.perf_counter()
                for raw in found:
                    load(raw)
                times[name].append(time.perf_counter() - start)
        figures = ", ".join(f"{name} {statistics.median(t):.3f} s" for name, t in times.items())
        print(f"{folder}: {len(found)} blocks, {declined} declined; {figures}")


if __name__ == "__main__":
    main()
