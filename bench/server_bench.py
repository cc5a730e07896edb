"""The ``server`` benchmark section: real ``bundle-mcp serve`` processes over MCP stdio.

Every number here is measured from a client's seat: ``python -m bundle_mcp.cli serve BUNDLE``
runs as a subprocess, and the SDK client (``mcp.Client`` over ``stdio_client``) talks to it. A
call's time is the wall time around ``await client.call_tool(...)``, so it includes the JSON-RPC
round trip, the client's pydantic parsing and the client's own check of the result against the
tool's output schema (the SDK does that with ``jsonschema``). That last part is timed separately
(``client validation``), so a reader can subtract it: another client would not pay it.

Per bundle (``run_bundle``):

1. **main session**: one server with an empty cache folder. ``tools/list``, then for each tool
   case the first call (``first call``: the first call of that tool in this process; the first
   case also pays the cold load) and ``--warm`` more calls (median, p90). After each first call
   the driver waits for the server's background parse-cache write to finish, so that the write
   does not land inside the warm samples (``cache_settle_s`` records how long it took). Then
   the edit scenario (a file changes between two calls), then the server's peak RSS.
2. **cold**: a fresh server per call for five tools, ``--repeat`` times each, once with an
   empty cache folder (``cold (no cache)``) and once with a copy of the cache folder the main
   session filled (``cold (cache)``).
3. **rg**: ``rg -F -i -c TERM BUNDLE`` for the rare and the common search term, the bar for
   ``search_concepts``.

The module is imported by ``bench/run.py``; it also runs two helpers in fresh processes:
``python bench/server_bench.py pick BUNDLE`` (IDs and terms to query) and
``python bench/server_bench.py embed BUNDLE`` (embedding throughput).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from formatting import fmt_time  # a sibling module: bench/ is on sys.path for the scripts

BENCH_DIR = Path(__file__).resolve().parent
REPO_DIR = BENCH_DIR.parent

CALL_TIMEOUT_S = 600
HELPER_TIMEOUT_S = 1800
EDIT_FILES = 5
EDIT_LINE = b"\nA line appended by the benchmark between two calls.\n"
SETTLE_QUIET_S = 0.4
SETTLE_TIMEOUT_S = 180

# Tools the section never calls: the write tools change the bundle, and search_semantic answers
# from a background embedding index (its latency is the model's, measured under "embeddings").
WRITE_TOOLS = frozenset({
    "write_concept", "apply_concept_patch", "apply_temporal_upgrade", "apply_v02_migration",
    "preview_concept_patch", "preview_temporal_upgrade", "preview_v02_migration",
})
SKIPPED_TOOLS = {"search_semantic": "embedding search: background model, not measured here"}

# The tools measured cold (a fresh server per call), and the case used for each.
COLD_CASES = ("list_concepts", "read_concept", "search_concepts:rare", "get_neighbors",
              "search_sections")


@dataclass(frozen=True)
class Case:
    key: str  # unique per bundle, e.g. "search_concepts:rare"
    tool: str
    label: str  # what the table shows in the "args" column
    args: dict[str, Any]


def cases_for(targets: dict[str, Any]) -> list[Case]:
    """The representative calls of every read tool, for one bundle's targets."""
    hub, mid = targets["hub"], targets["mid"]
    rare, common, sections = targets["rare"], targets["common"], targets["sections_query"]
    out = [
        Case("list_concepts", "list_concepts", "{}", {}),
        Case("read_concept", "read_concept", f"mid concept {mid}", {"concept_id": mid}),
        Case("search_concepts:rare", "search_concepts", f"rare '{rare}', limit 20",
             {"query": rare, "limit": 20}),
        Case("search_concepts:common", "search_concepts", f"common '{common}', limit 100",
             {"query": common, "limit": 100}),
        Case("get_neighbors", "get_neighbors", f"hub {hub}, limit 100",
             {"concept_id": hub, "limit": 100}),
        Case("search_sections", "search_sections", f"'{sections}'", {"query": sections}),
        Case("validate_bundle", "validate_bundle", "{}", {}),
        Case("get_semantic_graph", "get_semantic_graph", "{}", {}),
    ]
    out += [Case(f"expand_neighbors:d{d}", "expand_neighbors", f"[hub], depth {d}",
                 {"entity_ids": [hub], "depth": d}) for d in (1, 2, 3)]
    out.append(Case("fetch_slice", "fetch_slice", "mid concept", {"entity_id": mid}))
    out += [Case(f"query_subgraph:d{d}", "query_subgraph", f"seed [hub], depth {d}",
                 {"seed_ids": [hub], "depth": d}) for d in (1, 2, 3)]
    out += [Case(f"visualize_graph:d{d}", "visualize_graph", f"seed [hub], depth {d}",
                 {"seed_ids": [hub], "depth": d}) for d in (1, 2, 3)]
    return out


# --------------------------------------------------------------------------------------------
# Helpers run in fresh processes (so the driver never holds a parsed bundle).


def pick_targets(bundle: str, info: dict[str, Any] | None) -> dict[str, Any]:
    """IDs and terms to query: a mid-bundle concept, the hub, five files to edit, terms."""
    from collections import Counter

    from bundle_mcp.loader import load_bundle

    snapshot, _ = load_bundle(bundle)
    ids = sorted(snapshot.concepts)
    if not ids:
        raise SystemExit("the bundle has no parseable concept")
    info = info or {}
    hub = info.get("hub")
    if hub not in snapshot.concepts:
        # The concept most other concepts link to (ties by ID): the real hub of a corpus.
        inbound: Counter[str] = Counter()
        for cid, doc in snapshot.concepts.items():
            for link in {lk.concept_id for lk in doc.markdown.links}:
                if link and link != cid and link in snapshot.concepts:
                    inbound[link] += 1
        hub = min(inbound, key=lambda c: (-inbound[c], c)) if inbound else ids[0]
    mid = ids[len(ids) // 2]
    others = [c for c in ids if c not in (hub, mid)]
    step = max(1, len(others) // EDIT_FILES)
    edit = [others[min(len(others) - 1, step // 2 + i * step)] for i in range(EDIT_FILES)]
    edit = list(dict.fromkeys(edit))  # tiny bundles: no duplicates
    return {
        "hub": hub,
        "mid": mid,
        "edit_ids": edit,
        "edit_paths": [snapshot.concepts[c].path for c in edit],
        "rare": info.get("rare", "vcpkg"),
        "common": info.get("common", "function"),
        "sections_query": info.get("sections_query", "function pointer"),
        "concepts": len(ids),
    }


def embed_throughput(bundle: str) -> dict[str, Any]:
    """Concepts per second of SemanticIndex filling one snapshot (model load timed apart)."""
    import dataclasses

    try:
        from bundle_mcp.semantic import MINILM, READY, SemanticIndex
    except Exception as exc:  # the package itself is missing or broken
        return {"status": "not measured", "reason": f"bundle_mcp.semantic: {exc!r}"}
    if not MINILM.available():
        return {"status": "not measured", "reason": "the semantic extra is not installed"}
    from bundle_mcp.loader import load_bundle

    snapshot, _ = load_bundle(bundle)
    started = time.perf_counter()
    try:
        embedder = MINILM.load()
    except Exception as exc:
        return {"status": "not measured", "reason": f"the model did not load: {exc!r}"}
    load_s = time.perf_counter() - started
    source = dataclasses.replace(MINILM, load=lambda: embedder)
    index = SemanticIndex(source, cache=None)  # no disk cache: every vector is computed
    started = time.perf_counter()
    status = index.wait(snapshot, timeout=HELPER_TIMEOUT_S - 120)
    fill_s = time.perf_counter() - started
    index.close()
    out: dict[str, Any] = {
        "status": "measured" if status == READY else f"index {status}",
        "model": MINILM.model_key,
        "max_chars": MINILM.max_chars,
        "concepts": len(snapshot.concepts),
        "model_load_s": load_s,
        "fill_s": fill_s,
        "concepts_per_s": len(snapshot.concepts) / fill_s if status == READY else None,
    }
    try:
        import torch

        out["torch_threads"] = torch.get_num_threads()
    except Exception:
        pass
    return out


def _helper(kind: str, bundle: str, info: dict[str, Any] | None = None) -> dict[str, Any]:
    cmd = [sys.executable, str(Path(__file__).resolve()), kind, bundle]
    if info:
        cmd += ["--info", json.dumps(info)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=HELPER_TIMEOUT_S,
                          cwd=REPO_DIR)
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["(no stderr)"])[-1]
        raise RuntimeError(f"{kind} {bundle}: exit {proc.returncode}: {tail}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


# --------------------------------------------------------------------------------------------
# One server session.


@dataclass
class Session:
    client: Any
    pid: int | None
    start_s: float
    validation_s: float = 0.0  # client-side output-schema check of the last call
    start_memory_mib: dict[str, float] | None = None  # right after initialize: the baseline


def _children() -> dict[int, str]:
    """This process's child processes (pid → command line), read from /proc."""
    me = os.getpid()
    out: dict[int, str] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return out
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as f:
                stat = f.read()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            if ppid != me:
                continue
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                out[int(entry)] = f.read().replace(b"\0", b" ").decode("utf-8", "replace")
        except (OSError, ValueError, IndexError):
            continue
    return out


def proc_memory(pid: int | None) -> dict[str, float]:
    """VmHWM (peak RSS) and VmRSS of a process, in MiB; empty when unreadable."""
    out: dict[str, float] = {}
    if pid is None:
        return out
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith(("VmHWM:", "VmRSS:")):
                    out[line.split(":")[0]] = int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        pass
    return out


@contextlib.asynccontextmanager
async def open_session(bundle: str, cache_dir: Path, log_path: Path) -> AsyncIterator[Session]:
    """Start ``bundle-mcp serve BUNDLE`` under a real stdio client; its stderr goes to a log."""
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "bundle_mcp.cli", "serve", bundle],
        # The parse cache and the (unused) embedding cache both live in the per-run folder.
        env={"BUNDLE_MCP_CACHE_DIR": str(cache_dir), "XDG_CACHE_HOME": str(cache_dir)},
        cwd=str(REPO_DIR),
    )
    before = set(_children())
    with open(log_path, "a", encoding="utf-8") as log:
        log.write(f"--- serve {bundle} (cache {cache_dir})\n")
        log.flush()
        started = time.perf_counter()
        async with Client(stdio_client(params, errlog=log),
                          read_timeout_seconds=CALL_TIMEOUT_S) as client:
            start_s = time.perf_counter() - started
            spawned = [p for p, cmd in _children().items()
                       if p not in before and "bundle_mcp.cli" in cmd]
            session = Session(client, max(spawned) if spawned else None, start_s)
            session.start_memory_mib = proc_memory(session.pid)
            original = client.session.validate_tool_result

            async def timed_validation(name: str, result: Any) -> None:
                t0 = time.perf_counter()
                try:
                    await original(name, result)
                finally:
                    session.validation_s += time.perf_counter() - t0

            # The SDK checks every structured result against the tool's output schema on the
            # client side; it is timed apart so that its cost can be told from the server's.
            client.session.validate_tool_result = timed_validation
            yield session


def _structured_size(result: Any) -> int:
    content = result.structured_content
    if content is not None:
        return len(json.dumps(content, ensure_ascii=False, separators=(",", ":")))
    return sum(len(getattr(block, "text", "") or "") for block in result.content)


async def timed_call(session: Session, tool: str, args: dict[str, Any],
                     measure_size: bool = True) -> dict[str, Any]:
    """One ``call_tool``: wall seconds, client validation seconds, size, error code."""
    from mcp import MCPError

    session.validation_s = 0.0
    t0 = time.perf_counter()
    try:
        result = await session.client.call_tool(tool, args)
    except MCPError as exc:
        return {"s": time.perf_counter() - t0, "error": f"mcp_error {exc.code}",
                "message": str(exc)[:300]}
    except RuntimeError as exc:  # the SDK rejected the structured content
        return {"s": time.perf_counter() - t0, "error": "client_validation_failed",
                "message": str(exc)[:300]}
    out: dict[str, Any] = {"s": time.perf_counter() - t0, "validation_s": session.validation_s}
    if result.is_error:
        content = result.structured_content
        out["error"] = (content.get("code") if isinstance(content, dict) else None) or "is_error"
        if isinstance(content, dict):
            out["message"] = str(content.get("message", ""))[:300]
    if measure_size or result.is_error:
        out["size"] = _structured_size(result)
    out["_result"] = result
    return out


def _strip(sample: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in sample.items() if k != "_result"}


# --------------------------------------------------------------------------------------------
# Cache folder settling: wait until the server's background pack write is over.


def _cache_state(cache_dir: Path) -> tuple:
    folder = cache_dir / "parse"
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return ()
    state = []
    for name in names:
        try:
            st = os.stat(folder / name)
        except OSError:
            continue
        state.append((name, st.st_size, st.st_mtime_ns))
    return tuple(state)


async def settle_cache(cache_dir: Path) -> float:
    """Wait until no temporary pack exists and the folder is unchanged for a short while."""
    import anyio

    started = time.perf_counter()
    await anyio.sleep(0.05)
    last, quiet_since = _cache_state(cache_dir), time.perf_counter()
    while time.perf_counter() - started < SETTLE_TIMEOUT_S:
        await anyio.sleep(0.05)
        state = _cache_state(cache_dir)
        if state != last:
            last, quiet_since = state, time.perf_counter()
            continue
        writing = any(name.endswith(".tmp") for name, _, _ in state)
        if not writing and time.perf_counter() - quiet_since >= SETTLE_QUIET_S:
            break
    return time.perf_counter() - started - SETTLE_QUIET_S


def _pack_bytes(cache_dir: Path) -> int:
    return sum(size for name, size, _ in _cache_state(cache_dir) if name.endswith(".json"))


# --------------------------------------------------------------------------------------------
# The measurements of one bundle.


def _p90(values: list[float]) -> float | None:
    if not values:
        return None
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=10, method="inclusive")[-1]


def _med(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _one_file_parse_s(path: str, data: bytes, repeat: int = 5) -> float:
    """In-process cost of parsing one file: parse_document plus its Markdown facts."""
    from bundle_mcp.loader import parse_document
    from bundle_mcp.okf.markdown import markdown_parser

    markdown_parser()  # built once, outside the timing
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        doc = parse_document(path, data)
        doc.markdown  # noqa: B018 - the lazy parse is the point
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


async def _main_session(bundle: Any, targets: dict[str, Any], cases: list[Case],
                        cache_dir: Path, log: Path, warm: int, budget_s: float,
                        ) -> dict[str, Any]:
    out: dict[str, Any] = {"cases": {}, "skipped": {}}
    async with open_session(bundle.path, cache_dir, log) as session:
        out["start_s"] = session.start_s
        out["server_pid_found"] = session.pid is not None
        out["memory_after_start_mib"] = session.start_memory_mib
        t0 = time.perf_counter()
        listed = await session.client.list_tools()
        out["list_tools_s"] = time.perf_counter() - t0
        served = sorted(t.name for t in listed.tools)
        out["tools_served"] = served
        known = {c.tool for c in cases}
        for name in served:
            if name in WRITE_TOOLS:
                out["skipped"][name] = "write tool"
            elif name in SKIPPED_TOOLS:
                out["skipped"][name] = SKIPPED_TOOLS[name]
            elif name not in known:
                out["skipped"][name] = "no representative arguments in the benchmark"
        for case in cases:
            if case.tool not in served:
                out["cases"][case.key] = {"error": "not served"}
                continue
            _log_progress(f"  {bundle.name}: {case.key}")
            first = await timed_call(session, case.tool, case.args)
            settle = await settle_cache(cache_dir)
            samples: list[dict[str, Any]] = []
            began = time.perf_counter()
            for i in range(warm):
                if i >= 5 and time.perf_counter() - began > budget_s:
                    break
                samples.append(_strip(await timed_call(session, case.tool, case.args,
                                                       measure_size=False)))
            ok = [s for s in samples if "error" not in s]
            out["cases"][case.key] = {
                "tool": case.tool, "label": case.label, "args": case.args,
                "first": _strip(first), "cache_settle_s": settle,
                "warm_n": len(samples),
                "warm_median_s": _med([s["s"] for s in ok]),
                "warm_p90_s": _p90([s["s"] for s in ok]),
                "warm_min_s": min((s["s"] for s in ok), default=None),
                "warm_validation_median_s": _med([s.get("validation_s", 0.0) for s in ok]),
                "warm_net_median_s": _med([s["s"] - s.get("validation_s", 0.0) for s in ok]),
                "warm_errors": sorted({s["error"] for s in samples if "error" in s}),
                "warm_s": [round(s["s"], 6) for s in samples],
                "warm_validation_s": [round(s.get("validation_s", 0.0), 6) for s in samples],
            }
        out["edit"] = await _edit_scenario(bundle, targets, session, cache_dir)
        out["memory_mib"] = proc_memory(session.pid)
    out["cache_settle_final_s"] = await settle_cache(cache_dir)
    out["pack_bytes"] = _pack_bytes(cache_dir)
    return out


async def _edit_scenario(bundle: Any, targets: dict[str, Any], session: Session,
                         cache_dir: Path) -> dict[str, Any]:
    """A concept file changes between two calls: read_concept on it, and the one-file parse."""
    samples = []
    for cid, rel in zip(targets["edit_ids"], targets["edit_paths"], strict=True):
        full = Path(bundle.path) / rel
        original = full.read_bytes()
        args = {"concept_id": cid}
        await timed_call(session, "read_concept", args, measure_size=False)  # warm, unchanged
        await settle_cache(cache_dir)
        edited = original + EDIT_LINE
        try:
            full.write_bytes(edited)
            call = await timed_call(session, "read_concept", args, measure_size=False)
        finally:
            full.write_bytes(original)
        result = call.pop("_result", None)
        text = json.dumps(result.structured_content) if result is not None else ""
        call["saw_edit"] = "appended by the benchmark" in text
        call["path"] = rel
        call["one_file_parse_s"] = _one_file_parse_s(rel, edited)
        samples.append(call)
        # The restore is a change too: absorb it (and its cache write) before the next file.
        await settle_cache(cache_dir)
        await timed_call(session, "read_concept", args, measure_size=False)
        await settle_cache(cache_dir)
    ok = [s for s in samples if "error" not in s]
    return {
        "samples": samples,
        "median_s": _med([s["s"] for s in ok]),
        "net_median_s": _med([s["s"] - s.get("validation_s", 0.0) for s in ok]),
        "one_file_parse_median_s": _med([s["one_file_parse_s"] for s in samples]),
        "all_saw_edit": all(s["saw_edit"] for s in samples),
        "errors": sorted({s["error"] for s in samples if "error" in s}),
    }


async def _cold_call(bundle: Any, case: Case, cache_dir: Path, log: Path) -> dict[str, Any]:
    try:
        async with open_session(bundle.path, cache_dir, log) as session:
            call = _strip(await timed_call(session, case.tool, case.args))
            call["start_s"] = session.start_s
            call["start_plus_call_s"] = session.start_s + call["s"]
            call["memory_mib"] = proc_memory(session.pid)
    except Exception as exc:  # a server that did not start is a finding, not a crash
        return {"error": "session_failed", "message": repr(exc)[:300]}
    return call


def _rg(bundle: Any, term: str, runs: int) -> dict[str, Any]:
    rg = shutil.which("rg")
    if rg is None:
        return {"error": "rg not found (apt-get install ripgrep)"}
    cmd = [rg, "-F", "-i", "-c", term, bundle.path]
    probe = subprocess.run(cmd, capture_output=True, text=True)
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - t0)
    version = subprocess.run([rg, "--version"], capture_output=True, text=True).stdout
    return {"term": term, "command": ["rg", "-F", "-i", "-c", term, "BUNDLE"],
            "files_matched": len(probe.stdout.splitlines()), "runs": runs,
            "median_s": statistics.median(times), "p90_s": _p90(times),
            "samples_s": [round(t, 6) for t in times],
            "version": version.splitlines()[0] if version else None}


def run_bundle(bundle: Any, args: Any, workdir: Path) -> dict[str, Any]:
    import anyio

    targets = _helper("pick", bundle.path, bundle.info)
    cases = cases_for(targets)
    by_key = {c.key: c for c in cases}
    folder = Path(tempfile.mkdtemp(prefix=f"server-{bundle.name}-", dir=workdir))
    log = folder / "server-stderr.log"
    warm_cache = folder / "cache-main"
    row: dict[str, Any] = {"bundle": bundle.name, "kind": bundle.kind, "bytes": bundle.bytes,
                           "files": bundle.files, "concepts": targets["concepts"],
                           "targets": targets, "warm_calls": args.warm,
                           "warm_budget_s": args.warm_budget, "loadavg_1m_before": _loadavg()}
    _log_progress(f"server: {bundle.name}: main session ({len(cases)} cases, "
                  f"{args.warm} warm calls each)")
    try:
        row["main"] = anyio.run(_main_session, bundle, targets, cases, warm_cache, log,
                                args.warm, args.warm_budget)
    except Exception as exc:
        row["main"] = {"error": "session_failed", "message": repr(exc)[:500], "cases": {}}
    mem = row["main"].get("memory_mib", {})
    if mem.get("VmHWM"):
        row["peak_rss_mib"] = mem["VmHWM"]
        row["peak_rss_ratio"] = mem["VmHWM"] * 2**20 / bundle.bytes
        base = (row["main"].get("memory_after_start_mib") or {}).get("VmRSS")
        if base:
            # The interpreter, the SDK and the imports, before any bundle is loaded.
            row["base_rss_mib"] = base
            row["peak_rss_growth_ratio"] = (mem["VmHWM"] - base) * 2**20 / bundle.bytes

    _log_progress(f"server: {bundle.name}: cold starts ({len(COLD_CASES)} tools x 2 x "
                  f"{args.repeat})")
    cold: dict[str, dict[str, list[dict[str, Any]]]] = {
        k: {"no_cache": [], "cache": []} for k in COLD_CASES}
    have_pack = _pack_bytes(warm_cache) > 0
    n = 0
    for _ in range(args.repeat):
        for key in COLD_CASES:
            case = by_key[key]
            empty = folder / f"cache-cold-{n}"
            cold[key]["no_cache"].append(anyio.run(_cold_call, bundle, case, empty, log))
            shutil.rmtree(empty, ignore_errors=True)
            if have_pack:
                copy = folder / f"cache-warm-{n}"
                shutil.copytree(warm_cache, copy)
                cold[key]["cache"].append(anyio.run(_cold_call, bundle, case, copy, log))
                shutil.rmtree(copy, ignore_errors=True)
            n += 1
    row["cold"] = {}
    for key, modes in cold.items():
        entry: dict[str, Any] = {}
        for mode, samples in modes.items():
            ok = [s for s in samples if "error" not in s]
            entry[mode] = {
                "median_s": _med([s["s"] for s in ok]),
                "start_median_s": _med([s["start_s"] for s in ok]),
                "start_plus_call_median_s": _med([s["start_plus_call_s"] for s in ok]),
                "errors": sorted({s["error"] for s in samples if "error" in s}),
                "samples": samples,
            }
        row["cold"][key] = entry
    if not have_pack:
        row["cold_cache_note"] = "the main session left no parse-cache pack"

    runs = args.warm
    row["rg"] = {"rare": _rg(bundle, targets["rare"], runs),
                 "common": _rg(bundle, targets["common"], runs)}
    try:
        row["server_log_tail"] = log.read_text(encoding="utf-8").splitlines()[-20:]
    except OSError:
        pass
    shutil.rmtree(folder, ignore_errors=True)
    return row


def bench_server(ctx: Any) -> list[dict[str, Any]]:
    """Run the server section over every bundle; the embedding measurement comes last."""
    rows = []
    for bundle in ctx.bundles():
        rows.append(run_bundle(bundle, ctx.args, ctx.workdir))
    extras: dict[str, Any] = {}
    synthetic = [b for b in ctx.bundles() if b.kind == "synthetic"]
    if ctx.args.embed and synthetic:
        smallest = min(synthetic, key=lambda b: b.files)
        _log_progress(f"server: embedding throughput on {smallest.name}")
        try:
            extras["embeddings"] = {"bundle": smallest.name,
                                    **_helper("embed", smallest.path)}
        except Exception as exc:
            extras["embeddings"] = {"status": "not measured", "reason": str(exc)[:300]}
    else:
        extras["embeddings"] = {"status": "not measured", "reason": "--no-embed"}
    extras["targets"] = check_targets(rows)
    ctx.extras["server"] = extras
    return rows


# --------------------------------------------------------------------------------------------
# Targets (the numbers), judged on the ~10k synthetic bundle.


def _target_row(name: str, limit: str, measured: str, met: bool | None,
                note: str = "") -> dict[str, Any]:
    return {"target": name, "limit": limit, "measured": measured,
            "verdict": "n/a" if met is None else ("met" if met else "MISSED"), "note": note}


def check_targets(rows: list[dict[str, Any]]) -> dict[str, Any]:
    synthetic = [r for r in rows if r["kind"] == "synthetic" and r.get("main", {}).get("cases")]
    if not synthetic:
        return {"bundle": None, "rows": []}
    row = max(synthetic, key=lambda r: r["concepts"])
    cases = row["main"]["cases"]
    out = []

    def warm(key: str, limit_s: float, name: str) -> None:
        c = cases.get(key, {})
        med, net = c.get("warm_median_s"), c.get("warm_net_median_s")
        if med is None:
            out.append(_target_row(name, fmt_time(limit_s), "-", None,
                                   c.get("error") or ",".join(c.get("warm_errors", []))))
            return
        note = ""
        if (net <= limit_s) != (med <= limit_s):
            note = f"without client validation: {fmt_time(net)}"
        out.append(_target_row(name, f"≤ {fmt_time(limit_s)}", fmt_time(med), med <= limit_s,
                               note))

    warm("read_concept", 0.020, "warm read_concept")
    warm("get_neighbors", 0.020, "warm get_neighbors (hub, limit 100)")
    warm("fetch_slice", 0.020, "warm fetch_slice")
    warm("expand_neighbors:d2", 0.020, "warm expand_neighbors depth 2")
    for which in ("rare", "common"):
        key = f"search_concepts:{which}"
        warm(key, 0.060, f"warm search_concepts ({which})")
        c, rg = cases.get(key, {}), row.get("rg", {}).get(which, {})
        med, rg_med = c.get("warm_median_s"), rg.get("median_s")
        if med is not None and rg_med is not None:
            out.append(_target_row(f"search_concepts ({which}) faster than rg -F -i -c",
                                   f"< {fmt_time(rg_med)} (rg)", fmt_time(med), med < rg_med))
    warm("search_sections", 0.100, "warm search_sections")
    warm("list_concepts", 0.150, "warm list_concepts")
    warm("validate_bundle", 0.200, "warm validate_bundle")
    warm("get_semantic_graph", 1.5, "warm get_semantic_graph")
    edit = row["main"].get("edit", {})
    if edit.get("median_s") is not None:
        limit = 0.100 + edit["one_file_parse_median_s"]
        note = f"one-file parse {fmt_time(edit['one_file_parse_median_s'])}"
        if not edit.get("all_saw_edit"):
            note += "; the server did NOT always return the edited text"
        out.append(_target_row("edited-file read_concept", f"≤ {fmt_time(limit)}",
                               fmt_time(edit["median_s"]), edit["median_s"] <= limit, note))
    for mode, limit_s, label in (("no_cache", 5.0, "cold, no cache"),
                                 ("cache", 1.0, "cold, with cache")):
        for key in ("list_concepts", "read_concept", "search_concepts:rare"):
            c = row.get("cold", {}).get(key, {}).get(mode, {})
            med = c.get("median_s")
            if med is None:
                out.append(_target_row(f"{label}: {key}", f"≤ {fmt_time(limit_s)}", "-", None,
                                       ",".join(c.get("errors", [])) or "not measured"))
                continue
            total = c["start_plus_call_median_s"]
            note = f"start + call {fmt_time(total)}"
            if total > limit_s >= med:
                note += " (over the limit when the process start counts)"
            out.append(_target_row(f"{label}: {key}", f"≤ {fmt_time(limit_s)}", fmt_time(med),
                                   med <= limit_s, note))
    ratio = row.get("peak_rss_ratio")
    if ratio is not None:
        note = ""
        if row.get("peak_rss_growth_ratio") is not None:
            note = (f"{row['peak_rss_growth_ratio']:.2f}× without the "
                    f"{row['base_rss_mib']:.0f} MiB start-up baseline")
        out.append(_target_row("peak RSS / bundle bytes", "≤ 4.0×",
                               f"{ratio:.2f}× ({row['peak_rss_mib']:.0f} MiB)", ratio <= 4.0,
                               note))
    return {"bundle": row["bundle"], "concepts": row["concepts"], "rows": out}


# --------------------------------------------------------------------------------------------
# Rendering.


def _fmt_size(n: Any) -> str:
    if n is None:
        return "-"
    if n >= 2**20:
        return f"{n / 2**20:.1f} MiB"
    if n >= 1024:
        return f"{n / 1024:.1f} KiB"
    return f"{n} B"


def _table(headers: list[str], rows: list[list[str]], right: set[int] | None = None) -> list[str]:
    """A Markdown table; columns in ``right`` (default: all but the first two) align right."""
    right = set(range(2, len(headers))) if right is None else right
    lines = ["| " + " | ".join(headers) + " |",
             "|" + "|".join("---:" if i in right else "---" for i in range(len(headers))) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return lines


def _cold_cell(row: dict[str, Any], key: str, mode: str) -> str:
    c = row.get("cold", {}).get(key, {}).get(mode)
    if not c:
        return "-"
    if c["median_s"] is None:
        return ",".join(c["errors"]) or "-"
    return fmt_time(c["median_s"])


def render_bundle(row: dict[str, Any]) -> str:
    main = row.get("main", {})
    lines = [f"#### {row['bundle']} ({row['concepts']:,} concepts, "
             f"{row['bytes'] / 2**20:.1f} MiB)", ""]
    if main.get("error"):
        lines += [f"main session failed: {main['error']} {main.get('message', '')}", ""]
    table = []
    for key, c in main.get("cases", {}).items():
        if "first" not in c:
            table.append([key, "-", "-", "-", "-", "-", "-", "-", "-", c.get("error", "-")])
            continue
        first = c["first"]
        errors = sorted({*([first["error"]] if "error" in first else []), *c["warm_errors"]})
        table.append([
            c["tool"], c["label"],
            _cold_cell(row, key, "no_cache"), _cold_cell(row, key, "cache"),
            fmt_time(first["s"]), fmt_time(c["warm_median_s"]), fmt_time(c["warm_p90_s"]),
            fmt_time(c["warm_validation_median_s"]), _fmt_size(first.get("size")),
            ", ".join(errors) or "-",
        ])
    lines += _table(["tool", "args", "cold (no cache)", "cold (cache)", "first call",
                     "warm median", "warm p90", "client validation", "size", "error"], table)
    lines.append("")
    edit = main.get("edit") or {}
    if edit.get("median_s") is not None:
        saw = "" if edit.get("all_saw_edit") else " (the edit was NOT always visible)"
        lines.append(f"- one file edited between calls: read_concept median "
                     f"{fmt_time(edit['median_s'])} over {len(edit['samples'])} files{saw}; "
                     f"one-file parse in-process {fmt_time(edit['one_file_parse_median_s'])} "
                     f"→ bar {fmt_time(0.1 + edit['one_file_parse_median_s'])}")
    if row.get("peak_rss_mib"):
        mem = main.get("memory_mib", {})
        growth = ""
        if row.get("base_rss_mib"):
            growth = (f"; minus the {row['base_rss_mib']:.0f} MiB the server holds right after "
                      f"start: {row['peak_rss_growth_ratio']:.2f}×")
        lines.append(f"- server peak RSS (VmHWM, after every case): {row['peak_rss_mib']:.0f} MiB"
                     f" = {row['peak_rss_ratio']:.2f}× bundle bytes{growth} "
                     f"(VmRSS at the end {mem.get('VmRSS', 0):.0f} MiB)")
    starts = [c.get(m, {}).get("start_median_s") for c in row.get("cold", {}).values()
              for m in ("no_cache", "cache")]
    starts = [s for s in starts if s is not None]
    if main.get("start_s") is not None:
        lines.append(f"- server start (spawn + initialize): {fmt_time(_med(starts))} median of "
                     f"the cold starts; tools/list {fmt_time(main.get('list_tools_s'))}")
    for which, rg in row.get("rg", {}).items():
        if "error" in rg:
            lines.append(f"- rg ({which}): {rg['error']}")
        else:
            lines.append(f"- `rg -F -i -c {rg['term']}` ({which}, {rg['files_matched']:,} files "
                         f"match): median {fmt_time(rg['median_s'])} over {rg['runs']} runs")
    if main.get("pack_bytes"):
        settle = [c.get("cache_settle_s", 0) for c in main.get("cases", {}).values()]
        lines.append(f"- parse-cache pack {_fmt_size(main['pack_bytes'])}; longest background "
                     f"pack write after a first call {fmt_time(max(settle, default=None))}")
    if main.get("skipped"):
        skipped = ", ".join(f"{k} ({v})" for k, v in sorted(main["skipped"].items()))
        lines.append(f"- not called: {skipped}")
    return "\n".join(lines)


def render_growth(rows: list[dict[str, Any]]) -> str:
    synthetic = sorted((r for r in rows if r["kind"] == "synthetic"),
                       key=lambda r: r["concepts"])
    if len(synthetic) < 2:
        return ""
    keys: list[str] = []
    for r in synthetic:
        keys += [k for k in r.get("main", {}).get("cases", {}) if k not in keys]
    headers = ["tool", "args"] + [f"{r['concepts']:,}" for r in synthetic]
    headers.append(f"{synthetic[-1]['concepts']:,} / {synthetic[0]['concepts']:,}")
    table = []
    for key in keys:
        cs = [r["main"]["cases"].get(key, {}) for r in synthetic]
        meds = [c.get("warm_median_s") for c in cs]
        ref = next((c for c in cs if c.get("label")), {})
        ratio = (f"{meds[-1] / meds[0]:.1f}×" if meds[0] and meds[-1] else "-")
        table.append([key.split(":")[0], ref.get("label", key), *map(fmt_time, meds), ratio])
    return "\n".join(["#### Growth: warm medians by bundle size", "",
                      *_table(headers, table)])


def render_targets(targets: dict[str, Any]) -> str:
    if not targets.get("rows"):
        return "targets: no synthetic bundle was measured"
    lines = [f"#### Targets on {targets['bundle']} ({targets['concepts']:,} concepts)", ""]
    table = [[r["target"], r["limit"], r["measured"], r["verdict"], r["note"]]
             for r in targets["rows"]]
    headers = ["target", "limit", "measured", "verdict", "note"]
    return "\n".join(lines + _table(headers, table, right={1, 2}))


def render_embeddings(emb: dict[str, Any]) -> str:
    if emb.get("concepts_per_s"):
        return (f"- embeddings ({emb['model']}, {emb['bundle']}): "
                f"{emb['concepts_per_s']:.1f} concepts/s ({emb['concepts']:,} concepts in "
                f"{fmt_time(emb['fill_s'])}, texts cut to {emb['max_chars']} chars, no vector "
                f"cache); model load {fmt_time(emb['model_load_s'])}")
    return f"- embeddings: {emb.get('status', 'not measured')} ({emb.get('reason', '')})"


def render(ctx: Any, rows: list[dict[str, Any]]) -> str:
    parts = [render_bundle(r) for r in rows]
    growth = render_growth(rows)
    if growth:
        parts.append(growth)
    extras = ctx.extras.get("server", {})
    if "embeddings" in extras:
        parts.append(render_embeddings(extras["embeddings"]))
    if ctx.args.targets and "targets" in extras:
        parts.append(render_targets(extras["targets"]))
    return "\n\n".join(parts)


def _loadavg() -> float | None:
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


def _log_progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _helper_main(argv: list[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("kind", choices=("pick", "embed"))
    parser.add_argument("bundle")
    parser.add_argument("--info", default="{}")
    args = parser.parse_args(argv)
    if args.kind == "pick":
        result = pick_targets(args.bundle, json.loads(args.info))
    else:
        result = embed_throughput(args.bundle)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(_helper_main(sys.argv[1:]))
