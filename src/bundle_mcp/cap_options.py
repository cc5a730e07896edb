"""``--max-files`` and ``--max-bytes``: the loader's caps as command-line options.

Shared by serve, call, validate and graph, in a module of their own that imports nothing heavy:
``serve`` reads them before it answers ``initialize`` (docs/decisions/performance.md).
"""

from __future__ import annotations

import argparse

from .limits import DEFAULT_CAPS, Caps, parse_count, parse_size

__all__ = ["add_cap_arguments", "caps_of"]


def add_cap_arguments(parser: argparse.ArgumentParser) -> None:
    """``--max-files`` and ``--max-bytes``, shared by serve, call, validate and graph.

    Taken as text and read by :func:`caps_of`, so that a bad value is one line and exit 2
    (argparse's own error would print the usage too).
    """
    parser.add_argument(
        "--max-files", metavar="N",
        help=f"load bundles of at most N Markdown files (default {DEFAULT_CAPS.max_files})",
    )
    parser.add_argument(
        "--max-bytes", metavar="SIZE",
        help="load bundles whose Markdown files (and the files their computations name) hold at "
        "most SIZE bytes in all: a number, or with K, M or G for KiB, MiB, GiB "
        f"(default 64M = {DEFAULT_CAPS.max_bytes})",
    )


def caps_of(args: argparse.Namespace) -> Caps:
    """The caps the options ask for (the defaults for those not given).

    Raises:
        ValueError: the one line to print, naming the option.
    """
    try:
        files = DEFAULT_CAPS.max_files if args.max_files is None else parse_count(args.max_files)
    except ValueError as exc:
        raise ValueError(f"--max-files {exc}") from None
    try:
        size = DEFAULT_CAPS.max_bytes if args.max_bytes is None else parse_size(args.max_bytes)
    except ValueError as exc:
        raise ValueError(f"--max-bytes {exc}") from None
    return Caps(files, size)
