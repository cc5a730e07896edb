"""Where the server's memory goes (issue 29): a breakdown of resident memory, stage by stage.

Three modes, each on an existing bundle (``/work/bench10k``, or one ``bench/generate.py`` wrote):

``server`` (the default) spawns ``bundle-mcp serve BUNDLE`` as ``make bench`` does (raw JSON-RPC
over stdio, a fresh parse-cache folder) and reads the process's ``VmRSS`` and ``VmHWM`` from
``/proc/PID/status``: after ``initialize`` (the imports), after the first ``read_concept`` (the
load), when the warm-up is done, then around each of ``make bench``'s read-tool calls. Before each
call the peak is reset (``5`` written to ``/proc/PID/clear_refs``), so the peak printed beside a
call is that call's own transient peak (serialising a big answer), not the warm-up's.

``imports`` (BUNDLE is then any small bundle, the bundled example will do) measures what the
server holds before any bundle data: the ``VmRSS`` of ``bundle-mcp serve BUNDLE`` once it has
answered a call and warmed its small bundle, then, in one fresh interpreter, what each group of
the libraries it imports adds, imported one group after the other (:data:`IMPORT_GROUPS`; a
group's figure is what it adds to those before it, so the figures add up).

``steps`` loads the bundle in this process and runs the warm-up's steps one at a time
(:func:`bundle_mcp.readiness.warm_steps`), printing ``VmRSS`` after each and, with
``--tracemalloc``, the Python heap they left (slow: about five times as long; ``--sites N``
then lists the N lines of code whose allocations hold the most of it). With ``--cache
DIR`` it uses that parse-cache folder and saves the parse cache after the warm-up, as a serving
process does: run it twice on an empty folder, and the second run is a restart's warm-up.

    PYTHONPATH=src .venv/bin/python bench/memory.py /work/bench10k
    PYTHONPATH=src .venv/bin/python bench/memory.py /work/bench10k --mode steps --tracemalloc
    PYTHONPATH=src .venv/bin/python bench/memory.py /work/bench10k --mode steps --cache /tmp/pc
    PYTHONPATH=src .venv/bin/python bench/memory.py examples/coffee-roastery --mode imports

Resident figures are MiB; on a shared machine they drift far less than times do.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import os
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))

from targets import (  # noqa: E402  (a sibling script)
    Session,
    caps_arguments,
    cases,
    measure_edits,
)

MIB = 1024 * 1024


def status(pid: int | str = "self") -> dict[str, float]:
    """``VmRSS`` and ``VmHWM`` of a process, in MiB."""
    out: dict[str, float] = {}
    with open(f"/proc/{pid}/status", encoding="ascii") as lines:
        for line in lines:
            key = line.split(":")[0]
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(line.split()[1]) / 1024
    return out


def reset_peak(pid: int | str = "self") -> None:
    """Make ``VmHWM`` start again from the present ``VmRSS`` (Linux ``clear_refs``)."""
    with open(f"/proc/{pid}/clear_refs", "w", encoding="ascii") as refs:
        refs.write("5")


def bench_info(bundle: Path) -> dict[str, Any]:
    """The hub and a rare word, as ``generate`` reports them, found again in the files."""
    hub = "core/hub" if (bundle / "core" / "hub.md").exists() else ""
    rare = "zq01346"
    return {"hub": hub, "rare_word_example": rare}


def semantic_calls(session: Session, pid: int, limit_s: float = 1800.0) -> None:
    """search_semantic until its index is ready: the model loaded and every concept embedded
    (the first call only starts that; it never waits for it)."""
    started = time.perf_counter()
    while True:
        _, body = session.call("search_semantic", {"query": "how is pipeline latency measured"})
        answer = json.loads(body)
        structured = answer.get("result", {}).get("structuredContent") or {}
        # Refused while no vector exists yet ("not ready yet, retry"): still filling.
        index_status = structured.get("embedding_status") or (
            "not_ready" if structured.get("code") == "operation_rejected" else None)
        figures = status(pid)
        row(f"search_semantic: {index_status} ({time.perf_counter() - started:.0f} s)", figures)
        if index_status not in ("partial", "not_ready") or time.perf_counter() - started > limit_s:
            return
        time.sleep(20)


def server_mode(bundle: Path, repeat: int, semantic: bool, edits: bool) -> None:
    markdown = list(bundle.rglob("*.md"))
    size = sum(p.stat().st_size for p in markdown)
    print(f"bundle: {len(markdown)} files, {size / MIB:.1f} MiB of Markdown "
          f"(4x: {4 * size / MIB:.0f} MiB)")
    with tempfile.TemporaryDirectory() as tmp:
        session = Session(str(bundle), str(Path(tmp, "cache")), tmp,
                          caps_arguments(len(markdown), size))
        session.start()
        assert session.process is not None
        pid = session.process.pid
        try:
            row("after initialize (imports)", status(pid))
            all_cases = cases(bundle, bench_info(bundle))
            session.call("read_concept", all_cases[0].arguments)
            row("after the first read_concept (load)", status(pid))
            ready = session.wait_ready()
            row(f"warm-up done ({ready:.1f} s)", status(pid))
            for case in all_cases:
                reset_peak(pid)
                before = status(pid)["VmRSS"]
                for _ in range(repeat):
                    _, body = session.call(case.tool, case.arguments)
                after = status(pid)
                print(f"  {case.label:<28} answer {len(body) / MIB:6.1f} MiB  "
                      f"rss {before:6.0f} -> {after['VmRSS']:6.0f}  "
                      f"call peak {after['VmHWM']:6.0f} (+{after['VmHWM'] - before:.0f})")
            row("after every read tool", status(pid))
            if edits:
                edited = all_cases[0].arguments["concept_id"]
                # The edits' own peak, not the read calls' (the follow-up warm-ups' part).
                reset_peak(pid)
                timings = measure_edits(session, bundle, edited)
                row("after an edit, a deletion, a creation", status(pid))
                print("  next answer: " + ", ".join(
                    f"{name.removesuffix('_s')} {seconds * 1000:.0f} ms"
                    for name, seconds in timings.items()))
            if semantic:
                semantic_calls(session, pid)
        finally:
            session.stop()


# What ``serve`` imports, in groups, in the order ``imports_mode`` imports them: the MCP SDK
# first (its package imports its client, its high-level server and their HTTP stack too), then
# the libraries the tools compute with, then the server's own modules (which import the rest).
IMPORT_GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("the MCP SDK (mcp, mcp_types)", ("mcp",)),
    ("numpy", ("numpy",)),
    ("jsonschema, jsonschema-rs", ("jsonschema", "jsonschema_rs")),
    ("PyYAML, markdown-it-py, zstandard, snowballstemmer",
     ("yaml", "markdown_it", "zstandard", "snowballstemmer")),
    ("bundle_mcp's serving modules", ("bundle_mcp.cli", "bundle_mcp.server", "bundle_mcp.stdio",
                                      "bundle_mcp.dispatch", "bundle_mcp.readiness")),
)

# Run in a fresh interpreter: VmRSS before any group, then after each, one JSON line each.
_IMPORTS_PROBE = """
import importlib, json, sys
def rss():
    with open("/proc/self/status", encoding="ascii") as lines:
        return next(int(l.split()[1]) / 1024 for l in lines if l.startswith("VmRSS:"))
print(json.dumps(["", rss()]), flush=True)
for label, modules in json.loads(sys.argv[1]):
    for module in modules:
        importlib.import_module(module)
    print(json.dumps([label, rss()]), flush=True)
"""


def import_costs(groups: tuple[tuple[str, tuple[str, ...]], ...] = IMPORT_GROUPS
                 ) -> list[tuple[str, float]]:
    """``(label, MiB)`` for a bare interpreter (label ``""``, its whole VmRSS), then what each
    group adds, imported in order in one fresh interpreter of this environment."""
    done = subprocess.run(
        [sys.executable, "-c", _IMPORTS_PROBE, json.dumps([[g, list(m)] for g, m in groups])],
        capture_output=True, text=True, check=True)
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    out = [("", float(rows[0][1]))]
    out.extend((label, float(after) - float(before))
               for (_, before), (label, after) in zip(rows, rows[1:], strict=False))
    return out


def imports_mode(bundle: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        session = Session(str(bundle), str(Path(tmp, "cache")), tmp, ())
        session.start()
        assert session.process is not None
        try:
            session.call("list_concepts", {})
            session.wait_ready()
            served = status(session.process.pid)
        finally:
            session.stop()
    row(f"a server of {bundle.name}, warm", served)
    costs = import_costs()
    print(f"{'a bare interpreter':<44} VmRSS {costs[0][1]:7.1f} MiB")
    for label, added in costs[1:]:
        print(f"  + {label:<56} {added:6.1f} MiB")
    print(f"{'every group imported':<44} VmRSS {sum(c for _, c in costs):7.1f} MiB")


def row(label: str, figures: dict[str, float]) -> None:
    print(f"{label:<44} VmRSS {figures['VmRSS']:7.1f} MiB   VmHWM {figures['VmHWM']:7.1f} MiB",
          flush=True)


def steps_mode(bundle: Path, use_tracemalloc: bool, save: bool, sites: int = 0) -> None:
    from bundle_mcp.cancel import CancelToken
    from bundle_mcp.dispatch import Dispatcher
    from bundle_mcp.limits import DEFAULT_CAPS
    from bundle_mcp.readers import ALL_READER
    from bundle_mcp.readiness import warm_steps
    from bundle_mcp.semantic import SemanticIndex
    from bundle_mcp.serve_config import ServeConfig

    row("after import", status())
    if use_tracemalloc:
        tracemalloc.start()
    path = str(bundle)
    markdown = list(bundle.rglob("*.md"))
    caps = DEFAULT_CAPS
    size = sum(p.stat().st_size for p in markdown)
    if len(markdown) > caps.max_files or size > caps.max_bytes:
        caps = dataclasses.replace(caps, max_files=len(markdown) * 2, max_bytes=size * 2)
    semantic = SemanticIndex.default()
    dispatcher = Dispatcher(ServeConfig(bundles=(path,), caps=caps), semantic=semantic)
    token = CancelToken()
    started = time.perf_counter()
    view = dispatcher.served_snapshot(path, token, ALL_READER)
    heap(f"loaded ({time.perf_counter() - started:.1f} s)", use_tracemalloc)
    for step in warm_steps(dispatcher, path, ALL_READER, view):
        started = time.perf_counter()
        step.build(token)
        heap(f"{step.name} ({time.perf_counter() - started:.1f} s)", use_tracemalloc)
    gc.collect()
    heap("after gc.collect()", use_tracemalloc)
    if use_tracemalloc and sites:
        print_sites(tracemalloc.take_snapshot(), sites)
    if save:
        dispatcher.save_parse_cache(path, dispatcher.refreshed_snapshot(path, token, ALL_READER))
        print("parse cache saved", flush=True)
    semantic.close()


def print_sites(snapshot: tracemalloc.Snapshot, count: int) -> None:
    """The ``count`` lines of code whose allocations hold the most of the Python heap now
    (tracemalloc's own frames left out): where a structure that is kept was made."""
    kept = snapshot.filter_traces([tracemalloc.Filter(False, tracemalloc.__file__)])
    stats = kept.statistics("lineno")
    print(f"the {count} allocation sites holding the most "
          f"(of {sum(s.size for s in stats) / MIB:.1f} MiB traced):")
    for stat in stats[:count]:
        frame = stat.traceback[0]
        print(f"  {stat.size / MIB:6.1f} MiB {stat.count:8d} blocks  "
              f"{_short(frame.filename)}:{frame.lineno}", flush=True)


def _short(filename: str) -> str:
    """A source file's path from its package (``bundle_mcp/...``, ``json/...``)."""
    parts = Path(filename).parts
    for anchor in ("bundle_mcp", "site-packages"):
        if anchor in parts:
            at = parts.index(anchor)
            return "/".join(parts[at + (anchor == "site-packages"):])
    return "/".join(parts[-2:])


def heap(label: str, use_tracemalloc: bool) -> None:
    figures = status()
    extra = ""
    if use_tracemalloc:
        current, _peak = tracemalloc.get_traced_memory()
        extra = f"   python heap {current / MIB:7.1f} MiB"
    print(f"{label:<44} VmRSS {figures['VmRSS']:7.1f} MiB{extra}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("bundle", type=Path)
    parser.add_argument("--mode", choices=("server", "steps", "imports"), default="server")
    parser.add_argument("--tracemalloc", action="store_true")
    parser.add_argument("--sites", type=int, default=0,
                        help="with --tracemalloc, then the N allocation sites holding the most "
                        "of the heap (steps)")
    parser.add_argument("--semantic", action="store_true",
                        help="then call search_semantic until its index is ready (server)")
    parser.add_argument("--edits", action="store_true",
                        help="then edit, delete and create a file as make bench does; it "
                        "writes to BUNDLE: give a copy (server)")
    parser.add_argument("--repeat", type=int, default=2, help="calls of each tool (server)")
    parser.add_argument("--cache", type=Path, default=None,
                        help="the parse-cache folder, saved after the warm-up: a second run on "
                        "it is a restart (steps)")
    args = parser.parse_args()
    if args.cache is not None:
        os.environ["BUNDLE_MCP_CACHE_DIR"] = str(args.cache)
    os.environ.setdefault("BUNDLE_MCP_CACHE_DIR", tempfile.mkdtemp(prefix="bundle-mcp-mem-"))
    if args.mode == "server":
        server_mode(args.bundle.resolve(), args.repeat, args.semantic, args.edits)
    elif args.mode == "imports":
        imports_mode(args.bundle.resolve())
    else:
        steps_mode(args.bundle.resolve(), args.tracemalloc, args.cache is not None, args.sites)


if __name__ == "__main__":
    main()
