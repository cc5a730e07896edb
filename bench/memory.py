"""Where the server's memory goes (issue 29): a breakdown of resident memory, stage by stage.

Two modes, both on an existing bundle (``/work/bench10k``, or one ``bench/generate.py`` wrote):

``server`` (the default) spawns ``bundle-mcp serve BUNDLE`` as ``make bench`` does (raw JSON-RPC
over stdio, a fresh parse-cache folder) and reads the process's ``VmRSS`` and ``VmHWM`` from
``/proc/PID/status``: after ``initialize`` (the imports), after the first ``read_concept`` (the
load), when the warm-up is done, then around each of ``make bench``'s read-tool calls. Before each
call the peak is reset (``5`` written to ``/proc/PID/clear_refs``), so the peak printed beside a
call is that call's own transient peak (serialising a big answer), not the warm-up's.

``steps`` loads the bundle in this process and runs the warm-up's steps one at a time
(:func:`bundle_mcp.readiness.warm_steps`), printing ``VmRSS`` after each and, with
``--tracemalloc``, the Python heap they left (slow: about five times as long). With ``--cache
DIR`` it uses that parse-cache folder and saves the parse cache after the warm-up, as a serving
process does: run it twice on an empty folder, and the second run is a restart's warm-up.

    PYTHONPATH=src .venv/bin/python bench/memory.py /work/bench10k
    PYTHONPATH=src .venv/bin/python bench/memory.py /work/bench10k --mode steps --tracemalloc
    PYTHONPATH=src .venv/bin/python bench/memory.py /work/bench10k --mode steps --cache /tmp/pc

Resident figures are MiB; on a shared machine they drift far less than times do.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import os
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


def row(label: str, figures: dict[str, float]) -> None:
    print(f"{label:<44} VmRSS {figures['VmRSS']:7.1f} MiB   VmHWM {figures['VmHWM']:7.1f} MiB",
          flush=True)


def steps_mode(bundle: Path, use_tracemalloc: bool, save: bool) -> None:
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
    if save:
        dispatcher.save_parse_cache(path, dispatcher.refreshed_snapshot(path, token, ALL_READER))
        print("parse cache saved", flush=True)
    semantic.close()


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
    parser.add_argument("--mode", choices=("server", "steps"), default="server")
    parser.add_argument("--tracemalloc", action="store_true")
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
    else:
        steps_mode(args.bundle.resolve(), args.tracemalloc, args.cache is not None)


if __name__ == "__main__":
    main()
