"""``bundle-mcp graph``: the bundle's graph for Graphviz, Mermaid, RDF stores, networkx and JSON.

Exit codes: 0 written; 1 the selection has more nodes than ``--max-nodes`` (nothing is written:
the budget is never applied by cutting); 2 usage error, unreadable bundle, unparseable files
(unless ``--skip-unparseable``), or a seed or folder the bundle does not have.

What is selected and in which order is :mod:`bundle_mcp.export.graph`; each format's writer is
in :mod:`bundle_mcp.export`. The output is UTF-8 with ``\\n`` line ends whatever the locale, so
two runs on the same files give the same bytes.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import BinaryIO, TextIO

from .cancel import CancelToken
from .cap_options import add_cap_arguments, caps_of
from .errors import BundleError
from .export import FORMATS, Rendering, mermaid, render
from .export.graph import DEFAULT_MAX_NODES, GraphQuery, OverBudget, SelectionError, select
from .export.rdf import BUNDLE_BASE, base_iri_problem
from .loader import PENDING_WRITE, load_bundle
from .model import Snapshot
from .validate_cli import report_unreadable

EXIT_OK = 0
EXIT_OVER_BUDGET = 1
EXIT_USAGE = 2
DEFAULT_FORMAT = "json"
PROG = "bundle-mcp graph"
DESCRIPTION = (
    "Export the graph of a bundle (links, typed relations, field edges; optionally tags and "
    "sections) for Graphviz, Mermaid, RDF stores, networkx or JSON."
)
EPILOG = (
    "exit codes: 0 written; 1 more nodes than --max-nodes (nothing written); 2 usage error, "
    "unreadable bundle, unparseable files, or a folder or seed the bundle does not have"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("bundle", help="the bundle folder (a relative or an absolute path)")
    parser.add_argument(
        "--format", choices=tuple(FORMATS), default=DEFAULT_FORMAT,
        help="dot (Graphviz), mermaid (a flowchart), json-ld and ntriples (the same RDF "
        "triples), graphml (networkx, yEd, Gephi), json (nodes, edges and meta; see "
        "README) (default: %(default)s)",
    )
    parser.add_argument(
        "--project", metavar="FOLDER",
        help="only the concepts under this folder of the bundle (edges leaving it are dropped)",
    )
    parser.add_argument(
        "--type", dest="types", action="append", default=[], metavar="TYPE",
        help="only concepts of this frontmatter type, compared case-insensitively; "
        "repeatable (any of them)",
    )
    parser.add_argument(
        "--seeds", action="extend", nargs="+", default=[], metavar="ID",
        help="only the nodes within --depth edges of these node IDs (a concept ID, a section "
        "locator with --with-sections, tag:NAME with --with-tags), edges followed in either "
        "direction; put BUNDLE before this option",
    )
    parser.add_argument(
        "--depth", type=int, metavar="N",
        help="how many edges from a seed (default 1; 0 is the seeds alone); needs --seeds",
    )
    parser.add_argument(
        "--with-tags", action="store_true",
        help="add a node per tag and a HAS_TAG edge from each concept carrying it",
    )
    parser.add_argument(
        "--with-sections", action="store_true",
        help="add the sections of each concept cut into more than one, with their PART_OF "
        "edges to it",
    )
    parser.add_argument(
        "--max-nodes", type=int, default=DEFAULT_MAX_NODES, metavar="N",
        help="refuse (exit 1, nothing written) a graph of more nodes than this; the message "
        "says how many it has (default: %(default)s)",
    )
    parser.add_argument(
        "--base-iri", default=BUNDLE_BASE, metavar="IRI",
        help="json-ld and ntriples: the IRI every node IRI starts with, such as urn:okf:roastery: "
        "or an https:// folder of your own (default: %(default)s, get_semantic_graph's bundle: "
        "prefix)",
    )
    parser.add_argument(
        "--skip-unparseable", action="store_true",
        help="export the parseable concepts when some files cannot be parsed (with a warning)",
    )
    parser.add_argument(
        "-o", "--output", metavar="FILE", help="write to FILE instead of standard output",
    )
    add_cap_arguments(parser)


def run(
    args: argparse.Namespace, out: BinaryIO | None = None, err: TextIO | None = None
) -> int:
    err = err or sys.stderr
    problem = _usage_problem(args)
    if problem is not None:
        print(f"{PROG}: {problem}", file=err)
        return EXIT_USAGE
    try:
        caps = caps_of(args)
    except ValueError as exc:
        print(f"{PROG}: {exc}", file=err)
        return EXIT_USAGE
    bundle_path = os.path.normpath(os.path.abspath(args.bundle))
    token = CancelToken()
    try:
        snapshot, _ = load_bundle(bundle_path, token, caps=caps)
    except (BundleError, OSError) as exc:
        return report_unreadable(PROG, exc, err)
    if not _parse_policy(snapshot, args.skip_unparseable, err):
        return EXIT_USAGE
    query = GraphQuery(
        project=args.project.removeprefix("./").strip("/") if args.project else None,
        types=tuple(args.types),
        seeds=tuple(dict.fromkeys(args.seeds)),
        depth=1 if args.depth is None else args.depth,
        with_tags=args.with_tags,
        with_sections=args.with_sections,
        max_nodes=args.max_nodes,
    )
    try:
        graph = select(snapshot, query, token)
    except SelectionError as exc:
        print(f"{PROG}: {exc.message}", file=err)
        for hint in exc.hints:
            print(f"  {hint}", file=err)
        return EXIT_USAGE
    except OverBudget as exc:
        print(
            f"{PROG}: the selected graph has {exc.nodes} nodes and {exc.edges} edges, more "
            f"than --max-nodes {exc.max_nodes}; nothing was written. Narrow it with "
            "--project FOLDER, --type TYPE or --seeds ID... --depth N (or leave out "
            "--with-sections/--with-tags), or raise --max-nodes.",
            file=err,
        )
        return EXIT_OVER_BUDGET
    text = render(graph, Rendering(args.format, args.base_iri))
    if args.format == "mermaid":
        for warning in mermaid.warnings(graph, text):
            print(f"{PROG}: warning: {warning}", file=err)
    data = text.encode("utf-8")
    if args.output:
        try:
            with open(args.output, "wb") as handle:
                handle.write(data)
        except OSError as exc:
            print(f"{PROG}: cannot write {args.output}: {os.strerror(exc.errno or 0)}", file=err)
            return EXIT_USAGE
    else:
        target = out or sys.stdout.buffer
        target.write(data)
        target.flush()
    print(
        f"{graph.summary()} (--max-nodes {query.max_nodes}; {graph.concepts_in_bundle} "
        "concepts in the bundle)",
        file=err,
    )
    return EXIT_OK


def _usage_problem(args: argparse.Namespace) -> str | None:
    if args.max_nodes < 1:
        return "--max-nodes wants a number of nodes, 1 or more"
    if args.depth is not None and not args.seeds:
        return "--depth needs --seeds: without seeds the whole (filtered) graph is exported"
    if args.depth is not None and args.depth < 0:
        return "--depth wants a number of edges, 0 or more"
    if any(not seed.strip() for seed in args.seeds):
        return "--seeds: a seed is blank"
    if any(not t.strip() for t in args.types):
        return "--type: a type is blank"
    if args.format in ("json-ld", "ntriples"):
        problem = base_iri_problem(args.base_iri)
        if problem is not None:
            return f"--base-iri {args.base_iri!r}: {problem}"
    return None


def _parse_policy(snapshot: Snapshot, skip_unparseable: bool, err: TextIO) -> bool:
    """Refuse a bundle with unparseable files (as the server does), unless told to skip them.

    A write that could be neither finished nor undone is reported either way: the export
    shows the files as they are.
    """
    for diagnostic in snapshot.skipped:
        if diagnostic.code == PENDING_WRITE:
            print(f"{PROG}: warning: {diagnostic.message}", file=err)
    broken = sorted(snapshot.broken, key=lambda d: d.path)
    if not broken:
        return True
    if skip_unparseable:
        files = ", ".join(d.path for d in broken)
        print(f"{PROG}: warning: exporting without {len(broken)} unparseable file(s): {files}",
              file=err)
        return True
    print(f"{PROG}: {len(broken)} file(s) of the bundle cannot be parsed", file=err)
    for doc in broken:
        error = doc.parse_error
        if error is not None:
            print(f"  {doc.path}: {error.code}: {error.message}", file=err)
    print("  fix them (bundle-mcp validate reports every problem), or export the rest with "
          "--skip-unparseable", file=err)
    return False
