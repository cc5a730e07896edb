"""``bundle-mcp view BUNDLE [-o FILE.html] [--serve HOST:PORT] [--as-of DATE]``.

Exit status: 0 when the page was written (or the server stopped), 1 when the bundle cannot be
loaded, 2 for a command line that cannot run.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
import tempfile
from collections.abc import Callable

from ..errors import BundleError, BundleMcpError
from ..loader import load_bundle
from ..okf.temporal import parse_date
from .data import DEFAULT_NODE_BUDGET, ViewOptions
from .page import build_page
from .serve import LivePage, ViewServer, is_loopback

EXIT_OK = 0
EXIT_LOAD_FAILED = 1
EXIT_USAGE = 2


class _Usage(BundleMcpError):
    """A command line that cannot run: reported on stderr, exit status 2."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("bundle", metavar="BUNDLE", help="the bundle folder")
    parser.add_argument(
        "-o", "--output", metavar="FILE.html",
        help="where to write the page (default: BUNDLE's folder name + .html in the current "
        "folder; - for standard output)",
    )
    parser.add_argument(
        "--serve", metavar="HOST:PORT",
        help="serve the page over HTTP on loopback instead (127.0.0.1, ::1 or localhost; port "
        "0 picks a free one); it is made again on the next request after the bundle changes",
    )
    parser.add_argument(
        "--as-of", metavar="YYYY-MM-DD",
        help="judge staleness at this date (default: today); fixes the page for tests and "
        "screenshots",
    )
    parser.add_argument(
        "--node-budget", type=int, default=DEFAULT_NODE_BUDGET, metavar="N",
        help=f"above N concepts the graph starts from the folder tree and opens folders on "
        f"click, showing at most N at once (default {DEFAULT_NODE_BUDGET})",
    )


def run(args: argparse.Namespace) -> int:
    try:
        return _run(args)
    except _Usage as exc:
        print(f"bundle-mcp view: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BundleError as exc:
        print(f"bundle-mcp view: {args.bundle}: {exc.message}", file=sys.stderr)
        return EXIT_LOAD_FAILED


def _run(args: argparse.Namespace) -> int:
    bundle = os.path.abspath(args.bundle)
    if not os.path.isdir(bundle):
        raise _Usage(f"{args.bundle}: not a folder")
    if args.node_budget < 1:
        raise _Usage("--node-budget wants a number of concepts, 1 or more")
    if args.serve and args.output:
        raise _Usage("give -o or --serve, not both")
    options = _options(args, bundle)
    if args.serve:
        host, port = _host_port(args.serve)
        return _serve(bundle, host, port, options)
    snapshot, _ = load_bundle(bundle)
    page = build_page(snapshot, options()).encode("utf-8")
    output = args.output or f"{os.path.basename(bundle) or 'bundle'}.html"
    if output == "-":
        sys.stdout.buffer.write(page)
        sys.stdout.flush()
    else:
        _write(output, page)
        print(f"bundle-mcp view: wrote {output} ({len(snapshot.concepts):,} concepts, "
              f"{len(page):,} bytes)", file=sys.stderr)
    return EXIT_OK


def _options(args: argparse.Namespace, bundle: str) -> Callable[[], ViewOptions]:
    """The options of each page made: a fixed date, or today's at the time it is made (a
    server left running past midnight judges staleness at the new day)."""
    name = os.path.basename(bundle)
    if args.as_of is not None:
        fixed = parse_date(args.as_of)
        if fixed is None:
            raise _Usage(f"--as-of wants a date YYYY-MM-DD, got {args.as_of!r}")
        chosen = ViewOptions(as_of=fixed, node_budget=args.node_budget, bundle_name=name)
        return lambda: chosen
    return lambda: ViewOptions(as_of=dt.date.today(), node_budget=args.node_budget,
                               bundle_name=name)


def _host_port(value: str) -> tuple[str, int]:
    host, sep, port_text = value.rpartition(":")
    if not sep or not port_text.isdigit() or not 0 <= int(port_text) < 65536:
        raise _Usage(f"--serve wants HOST:PORT, got {value!r}")
    host = host.removeprefix("[").removesuffix("]") or "127.0.0.1"
    if not is_loopback(host):
        raise _Usage(f"--serve {value}: the viewer serves on loopback only (127.0.0.1, ::1 or "
                     "localhost): the page holds the whole bundle")
    # "localhost" may resolve to another address family first; bind what it stands for here.
    return ("127.0.0.1" if host.lower() == "localhost" else host), int(port_text)


def _serve(bundle: str, host: str, port: int, options: Callable[[], ViewOptions]) -> int:
    live = LivePage(bundle, options)
    live.page()  # load once before listening: a bundle that cannot load fails here, exit 1
    try:
        server = ViewServer(host, port, live)
    except OSError as exc:
        raise _Usage(f"--serve {host}:{port}: cannot listen there "
                     f"({os.strerror(exc.errno or 0)})") from None
    # One write (print writes the line's end apart): a line a script reads for the address.
    sys.stderr.write(f"bundle-mcp view: serving {bundle} on {server.url} (Ctrl-C to stop)\n")
    sys.stderr.flush()
    try:
        server.serve_forever()
    finally:
        server.server_close()
    return EXIT_OK


def _write(path: str, data: bytes) -> None:
    """Write beside the target and rename, so a reader never sees half a page."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".bundle-view-", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
