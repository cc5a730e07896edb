"""Benchmarks for bundle-mcp (``make bench``). Never part of ``make test``.

The script runs a list of named sections (``SECTIONS``); each section takes the shared
:class:`Context` and returns table rows. Every measurement runs in a fresh interpreter
(``python bench/run.py --worker SCENARIO BUNDLE``), so one measurement's memory, caches and
memoised parses never leak into the next, and the peak RSS of that process is its own.

Each measurement is repeated (``--repeat``, fresh process each time) and the table shows the
median; every raw sample goes to ``bench/results/<YYYY-MM-DD>.json``. See ``bench/README.md``.

Add a section: write ``def bench_xxx(ctx: Context) -> list[dict]``, give it columns, and append a
:class:`Section` to ``SECTIONS``. Use ``ctx.bundles()`` for the shared bundles (generated once per
run) and ``ctx.run_worker(...)`` for a measurement in a fresh process.

The ``server`` section lives in ``bench/server_bench.py``: it drives real ``bundle-mcp serve``
processes through the MCP stdio client and renders its own tables.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from formatting import fmt_time  # a sibling module: bench/ is on sys.path for the scripts

BENCH_DIR = Path(__file__).resolve().parent
REPO_DIR = BENCH_DIR.parent
RESULTS_DIR = BENCH_DIR / "results"
DEFAULT_SIZES = (1000, 5000, 10000)
DEFAULT_CORPORA = (REPO_DIR.parent / "shared" / "corpora" / "cpp-docs",)
WORKER_TIMEOUT_S = 1800


# --------------------------------------------------------------------------------------------
# Worker side: one scenario in a fresh interpreter, one JSON object on stdout.
# --------------------------------------------------------------------------------------------


def _ru_maxrss_mib() -> float:
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # Linux reports KiB, macOS bytes.
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


def _peak_rss_mib() -> float:
    """Peak RSS of this process's own address space, in MiB.

    On Linux ``ru_maxrss`` survives fork and exec: a worker reports at least the driver's peak at
    the moment it was started (the driver held a whole generated bundle in memory, about 90 MiB),
    so it cannot isolate a worker. ``VmHWM`` belongs to the address space, which exec replaces,
    so it is the worker's own peak. Elsewhere ``ru_maxrss`` is the best there is.
    """
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024  # kB
    except (OSError, ValueError, IndexError):
        pass
    return _ru_maxrss_mib()


def _timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    start = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - start


def worker(scenario: str, bundle: str) -> dict[str, Any]:
    """Run one scenario against ``bundle`` and return its numbers (seconds, MiB)."""
    from bundle_mcp.cancel import CancelToken
    from bundle_mcp.loader import load_bundle
    from bundle_mcp.okf.markdown import markdown_parser
    from bundle_mcp.okf.temporal import reference_from
    from bundle_mcp.validation import ValidateOptions, validate

    markdown_parser()  # build the parser outside every timed region
    out: dict[str, Any] = {"base_rss_mib": _peak_rss_mib()}
    (snapshot, stats), out["load_s"] = _timed(lambda: load_bundle(bundle))
    out["documents"] = len(snapshot.documents)
    out["concepts"] = len(snapshot.concepts)
    out["parse_errors"] = len(snapshot.broken)
    out["parse_error_codes"] = _count(d.parse_error.code for d in snapshot.broken)

    if scenario == "load":
        pass
    elif scenario == "parse":
        def parse_all() -> int:
            return sum(len(doc.markdown.links) for doc in snapshot.concepts.values())

        out["links"], out["parse_s"] = _timed(parse_all)
        out["load_parse_s"] = out["load_s"] + out["parse_s"]
    elif scenario == "validate":
        options = ValidateOptions(
            reference=reference_from({}), check_links=True, check_orphans=True
        )
        report, out["validate_s"] = _timed(lambda: validate(snapshot, options, CancelToken()))
        out["conformant"] = report["conformance"]["conformant"]
        out["errors"] = report["conformance"]["errors"]
        out["warnings"] = report["guidance"]["warnings"]
        out["info"] = report["guidance"]["info"]
        out["diagnostic_codes"] = _count(d["code"] for d in report["diagnostics"])
    elif scenario == "reload":
        (warm, warm_stats), out["warm_reload_s"] = _timed(
            lambda: load_bundle(bundle, previous=snapshot, previous_stats=stats)
        )
        out["warm_same_revision"] = warm.revision == snapshot.revision
        out["warm_reused"] = _reused(snapshot, warm)
        # "Touch" = new mtime, same bytes: the stat key changes, so exactly one file is re-read
        # and re-parsed; the revision (a hash of the bytes) stays the same.
        paths = sorted(p for p, d in warm.documents.items() if d.concept_id is not None)
        touched = paths[len(paths) // 2]
        full = os.path.join(bundle, touched)
        st = os.stat(full)
        os.utime(full, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
        (after, _), out["touched_reload_s"] = _timed(
            lambda: load_bundle(bundle, previous=warm, previous_stats=warm_stats)
        )
        out["touched_reused"] = _reused(warm, after)
        out["touched_same_revision"] = after.revision == warm.revision
    else:
        raise SystemExit(f"unknown scenario {scenario!r}")
    out["peak_rss_mib"] = _peak_rss_mib()
    out["ru_maxrss_mib"] = _ru_maxrss_mib()  # inherited from the driver on Linux; see above
    return out


def _count(codes: Any) -> dict[str, int]:
    counts: dict[str, int] = {}
    for code in codes:
        counts[code] = counts.get(code, 0) + 1
    return dict(sorted(counts.items()))


def _reused(old: Any, new: Any) -> int:
    """How many documents of ``new`` are the very objects of ``old`` (not re-parsed)."""
    return sum(1 for p, d in new.documents.items() if old.documents.get(p) is d)


# --------------------------------------------------------------------------------------------
# Driver side: bundles, sections, tables, results file.
# --------------------------------------------------------------------------------------------


@dataclass
class Bundle:
    name: str
    path: str  # absolute, clean, no symlinks (load_bundle's rule)
    kind: str  # "synthetic" | "corpus"
    files: int
    bytes: int
    concepts_requested: int | None = None
    generate_s: float | None = None
    source: str | None = None
    note: str | None = None
    # What the server section queries: the generator's hub and rare word, or a corpus's terms.
    info: dict[str, Any] | None = None


@dataclass
class Context:
    args: argparse.Namespace
    workdir: Path
    samples: list[dict[str, Any]] = field(default_factory=list)
    extras: dict[str, dict[str, Any]] = field(default_factory=dict)  # section → summary
    _bundles: list[Bundle] | None = None

    def bundles(self) -> list[Bundle]:
        """The synthetic bundles (one per size) and the corpora, prepared once per run."""
        if self._bundles is None:
            self._bundles = self._prepare()
        return self._bundles

    def _prepare(self) -> list[Bundle]:
        from generate import generate, reserved_files

        from bundle_mcp.loader.capture import MAX_FILES, MAX_TOTAL_BYTES

        out: list[Bundle] = []
        for size in self.args.sizes:
            # A bundle may hold at most MAX_FILES Markdown files, index.md and log.md included:
            # the largest size is clamped to sit exactly at the cap.
            concepts = min(size, MAX_FILES - reserved_files(size))
            path = self.workdir / f"synthetic-{size}"
            started = time.perf_counter()
            stats = generate(path, concepts, self.args.seed)
            seconds = time.perf_counter() - started
            note = None
            if concepts != size:
                note = (f"{concepts} concepts + {stats['files'] - concepts} index/log files = "
                        f"{stats['files']} files (the {MAX_FILES}-file cap)")
            if stats["bytes"] > MAX_TOTAL_BYTES:
                note = f"{stats['bytes']} bytes exceeds the {MAX_TOTAL_BYTES}-byte cap"
            _log(f"generated synthetic-{size}: {stats['files']} files, "
                 f"{stats['bytes'] / 2**20:.1f} MiB in {seconds:.1f}s")
            info = {"hub": stats["hub"], "rare": stats["rare_word_example"],
                    "common": "pipeline", "sections_query": "pipeline latency",
                    "hub_inbound": stats["hub_inbound"], "pipeline_docs": stats["pipeline_docs"]}
            out.append(Bundle(f"synthetic-{size}", str(path), "synthetic", stats["files"],
                              stats["bytes"], concepts, seconds, note=note, info=info))
        for corpus in self.args.corpora:
            corpus = Path(corpus)
            if not corpus.is_dir():
                _log(f"corpus {corpus} not found: skipped")
                continue
            # Copied into the temp folder: the reload scenario touches a file, and the shared
            # corpus must never be modified.
            path = self.workdir / f"corpus-{corpus.name}"
            shutil.copytree(corpus, path, symlinks=True)
            files, size = _md_stats(path)
            _log(f"copied corpus {corpus.name}: {files} .md files, {size / 2**20:.1f} MiB")
            # A body-only rare term, a common one, and a two-word section query. The hub is
            # picked by the server section (the concept most others link to).
            info = {"rare": "vcpkg", "common": "function", "sections_query": "function pointer"}
            out.append(Bundle(corpus.name, str(path), "corpus", files, size,
                              source=str(corpus), info=info))
        return out

    def run_worker(self, scenario: str, bundle: Bundle, repeat: int) -> dict[str, Any]:
        cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", scenario, bundle.path]
        sample: dict[str, Any] = {"section": "loader", "bundle": bundle.name,
                                  "scenario": scenario, "repeat": repeat,
                                  "command": cmd, "loadavg_1m_before": _loadavg()}
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=WORKER_TIMEOUT_S,
                                  cwd=REPO_DIR)
        except subprocess.TimeoutExpired:
            sample["error"] = f"timed out after {WORKER_TIMEOUT_S}s"
        else:
            if proc.returncode == 0:
                sample.update(json.loads(proc.stdout.strip().splitlines()[-1]))
            else:
                tail = (proc.stderr.strip().splitlines() or ["(no stderr)"])[-1]
                sample["error"] = f"exit {proc.returncode}: {tail}"
        if "error" in sample:
            _log(f"  {bundle.name} {scenario} #{repeat}: {sample['error']}")
        self.samples.append(sample)
        return sample


@dataclass(frozen=True)
class Column:
    key: str
    header: str
    fmt: Callable[[Any], str]


@dataclass(frozen=True)
class Section:
    name: str
    title: str
    columns: tuple[Column, ...]
    run: Callable[[Context], list[dict[str, Any]]]
    # A section with its own layout (several tables) renders itself instead of one table.
    render: Callable[[Context, list[dict[str, Any]]], str] | None = None


def fmt_int(value: Any) -> str:
    return "-" if value is None else f"{value:,}"


def fmt_mib(value: Any) -> str:
    return "-" if value is None else f"{value:.1f}"


def fmt_ratio(value: Any) -> str:
    return "-" if value is None else f"{value:.1f}×"


def _median(samples: list[dict[str, Any]], key: str) -> float | None:
    values = [s[key] for s in samples if key in s and "error" not in s]
    return statistics.median(values) if values else None


LOADER_SCENARIOS = ("load", "parse", "validate", "reload")


def bench_loader(ctx: Context) -> list[dict[str, Any]]:
    """Cold load, full Markdown parse, validate, warm and one-file reloads, peak RSS."""
    rows = []
    for bundle in ctx.bundles():
        _log(f"loader: {bundle.name} ({ctx.args.repeat} repeat(s) x {len(LOADER_SCENARIOS)})")
        by_scenario: dict[str, list[dict[str, Any]]] = {s: [] for s in LOADER_SCENARIOS}
        # Round-robin, so slow drift of the shared machine spreads over every scenario.
        for r in range(ctx.args.repeat):
            for scenario in LOADER_SCENARIOS:
                by_scenario[scenario].append(ctx.run_worker(scenario, bundle, r))
        load = by_scenario["load"]
        parse = by_scenario["parse"]
        rss_parsed = _median(parse, "peak_rss_mib")
        base = _median(parse, "base_rss_mib")
        first = next((s for s in load if "error" not in s), {})
        row = {
            "bundle": bundle.name,
            "concepts": first.get("concepts"),
            "files": bundle.files,
            "mib": bundle.bytes / 2**20,
            "bytes": bundle.bytes,
            "parse_errors": first.get("parse_errors"),
            # Every worker starts with the same cold load, so all of them are load samples.
            "load_s": _median(sum(by_scenario.values(), []), "load_s"),
            "load_samples": sum(1 for x in sum(by_scenario.values(), []) if "load_s" in x),
            "load_parse_s": _median(parse, "load_parse_s"),
            "parse_s": _median(parse, "parse_s"),
            "validate_s": _median(by_scenario["validate"], "validate_s"),
            "warm_reload_s": _median(by_scenario["reload"], "warm_reload_s"),
            "touched_reload_s": _median(by_scenario["reload"], "touched_reload_s"),
            "base_rss_mib": _median(load, "base_rss_mib"),
            "rss_load_mib": _median(load, "peak_rss_mib"),
            "rss_parsed_mib": rss_parsed,
            "rss_validate_mib": _median(by_scenario["validate"], "peak_rss_mib"),
            "rss_parsed_ratio": (rss_parsed * 2**20 / bundle.bytes) if rss_parsed else None,
            "rss_parsed_growth_ratio": (
                (rss_parsed - base) * 2**20 / bundle.bytes if rss_parsed and base else None
            ),
            "errors": sum(1 for s in sum(by_scenario.values(), []) if "error" in s),
            "note": bundle.note,
        }
        v = next((s for s in by_scenario["validate"] if "error" not in s), None)
        if v is not None:
            row["validate_findings"] = {k: v[k] for k in ("errors", "warnings", "info")}
        if first.get("parse_error_codes"):
            row["parse_error_codes"] = first["parse_error_codes"]
        rows.append(row)
    return rows


SECTIONS: list[Section] = [
    Section(
        name="loader",
        title="Loader: cold load, Markdown parse, validate, reload, memory",
        columns=(
            Column("bundle", "bundle", str),
            Column("concepts", "concepts", fmt_int),
            Column("files", "files", fmt_int),
            Column("mib", "MiB", fmt_mib),
            Column("parse_errors", "parse errors", fmt_int),
            Column("load_s", "load", fmt_time),
            Column("load_parse_s", "load + parse", fmt_time),
            Column("validate_s", "validate", fmt_time),
            Column("warm_reload_s", "warm reload", fmt_time),
            Column("touched_reload_s", "reload, 1 touched", fmt_time),
            Column("rss_load_mib", "RSS load MiB", fmt_mib),
            Column("rss_parsed_mib", "RSS parsed MiB", fmt_mib),
            Column("rss_validate_mib", "RSS validate MiB", fmt_mib),
            Column("rss_parsed_ratio", "RSS parsed / bytes", fmt_ratio),
            Column("rss_parsed_growth_ratio", "(RSS parsed − base) / bytes", fmt_ratio),
        ),
        run=bench_loader,
    ),
    Section(
        name="server",
        title="Server: tool latency over MCP stdio, cold starts, an edited file, memory, rg",
        columns=(),
        run=lambda ctx: _server_bench().bench_server(ctx),
        render=lambda ctx, rows: _server_bench().render(ctx, rows),
    ),
]


def _server_bench() -> Any:
    import server_bench  # bench/ is sys.path[0] when this file runs as a script

    return server_bench


def markdown_table(section: Section, rows: list[dict[str, Any]]) -> str:
    headers = [c.header for c in section.columns]
    lines = ["| " + " | ".join(headers) + " |",
             "|" + "|".join("---" if i == 0 else "---:" for i in range(len(headers))) + "|"]
    for row in rows:
        lines.append("| " + " | ".join(c.fmt(row.get(c.key)) for c in section.columns) + " |")
    notes = [f"- {row['bundle']}: {row['note']}" for row in rows if row.get("note")]
    notes += [f"- {row['bundle']}: {row['errors']} failed sample(s), see the JSON"
              for row in rows if row.get("errors")]
    notes += [f"- {row['bundle']}: parse errors by code {row['parse_error_codes']}"
              for row in rows if row.get("parse_error_codes")]
    return "\n".join(lines + ([""] + notes if notes else []))


def _md_stats(root: Path) -> tuple[int, int]:
    files = size = 0
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        for name in filenames:
            if name.endswith(".md") and not name.startswith("."):
                full = os.path.join(dirpath, name)
                if not os.path.islink(full):
                    files += 1
                    size += os.path.getsize(full)
    return files, size


def _loadavg() -> float | None:
    """The 1-minute load average: context for a noisy sample on a shared machine."""
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _machine() -> dict[str, Any]:
    info: dict[str, Any] = {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor(),
        "system": platform.system(),
        "release": platform.release(),
        "cpu_count": os.cpu_count(),
    }
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu_model"] = line.split(":", 1)[1].strip()
                    break
        with open("/proc/meminfo", encoding="utf-8") as f:
            info["mem_total"] = f.readline().split(":", 1)[1].strip()
    except OSError:
        pass
    return info


def _package_versions() -> dict[str, str]:
    from importlib import metadata

    out = {}
    for name in ("bundle-mcp", "markdown-it-py", "mdit-py-plugins", "PyYAML"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return out


def _git_info() -> dict[str, Any]:
    """The commit, the files that differ from it under src/, and a hash of src/ as it is now.

    The server code may change while a long run goes on (several people work in the tree);
    comparing the hash at the start and at the end tells whether it did.
    """
    def git(*args: str) -> str | None:
        try:
            proc = subprocess.run(["git", "-C", str(REPO_DIR), *args], capture_output=True,
                                  text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return proc.stdout.rstrip() if proc.returncode == 0 else None

    digest = hashlib.sha256()
    for path in sorted((REPO_DIR / "src").rglob("*.py")):
        digest.update(str(path.relative_to(REPO_DIR)).encode() + b"\0" + path.read_bytes())
    status = git("status", "--porcelain", "--", "src", "contracts")
    return {"commit": git("rev-parse", "--short", "HEAD"),
            "uncommitted": status.splitlines() if status else [],
            "src_sha256": digest.hexdigest()[:16]}


def _merge_earlier(document: dict[str, Any], output: Path) -> None:
    """Keep the sections of an earlier run written to the same file that this run did not redo.

    Each kept section carries its own ``run`` (command, options, commit), and its samples and
    bundles are kept with it; the top-level fields describe this run.
    """
    try:
        earlier = json.loads(output.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    kept = {name: section for name, section in earlier.get("sections", {}).items()
            if name not in document["sections"]}
    if not kept:
        return
    for section in kept.values():
        section.setdefault("run", {"command": earlier.get("command"),
                                   "options": earlier.get("options"),
                                   "git": earlier.get("git"), "date": earlier.get("date"),
                                   "wall_s": earlier.get("wall_s")})
    document["sections"] = kept | document["sections"]
    document["samples"] = [s for s in earlier.get("samples", [])
                           if s.get("section", "loader") in kept] + document["samples"]
    names = {b["name"] for b in document["bundles"]}
    document["bundles"] += [b for b in earlier.get("bundles", []) if b["name"] not in names]
    document["merged_from_earlier_run"] = sorted(kept)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="bundle-mcp benchmarks (see bench/README.md)")
    parser.add_argument("--sizes", default=",".join(map(str, DEFAULT_SIZES)),
                        help="synthetic bundle sizes in concepts, comma-separated")
    parser.add_argument("--repeat", type=int, default=3, help="fresh processes per measurement")
    parser.add_argument("--quick", action="store_true", help="1,000 concepts only, 1 repeat")
    parser.add_argument("--seed", type=int, default=42, help="generator seed")
    parser.add_argument("--corpus", action="append", dest="corpora", metavar="PATH",
                        help="real bundle to measure too (default: ../shared/corpora/cpp-docs "
                             "when present; --corpus none disables)")
    parser.add_argument("--sections", default=",".join(s.name for s in SECTIONS),
                        help="sections to run, comma-separated")
    parser.add_argument("--output", type=Path, help="results file (default "
                        "bench/results/<YYYY-MM-DD>.json)")
    parser.add_argument("--keep", action="store_true", help="keep the generated bundles")
    parser.add_argument("--warm", type=int, default=None,
                        help="server section: warm calls per tool case (--quick: 5)")
    parser.add_argument("--warm-budget", type=float, default=60.0, metavar="SECONDS",
                        help="server section: stop a case's warm calls after this long "
                             "(at least 5 calls)")
    parser.add_argument("--targets", action="store_true",
                        help="server section: print the issue's targets, met or missed, for "
                             "the largest synthetic bundle")
    parser.add_argument("--no-embed", dest="embed", action="store_false",
                        help="server section: skip the embedding-throughput measurement")
    parser.add_argument("--worker", nargs=2, metavar=("SCENARIO", "BUNDLE"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes, args.repeat = "1000", 1
    if args.warm is None:
        args.warm = 5 if args.quick else 30
    args.sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    if args.repeat < 1 or args.warm < 1 or any(s < 1 for s in args.sizes):
        parser.error("--repeat, --warm and --sizes must be positive")
    if args.corpora is None:
        args.corpora = [] if args.quick else [str(p) for p in DEFAULT_CORPORA]
    args.corpora = [c for c in args.corpora if c != "none"]
    names = {s.name for s in SECTIONS}
    args.sections = [s for s in args.sections.split(",") if s]
    unknown = [s for s in args.sections if s not in names]
    if unknown:
        parser.error(f"unknown section(s) {unknown}; known: {sorted(names)}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.worker:
        print(json.dumps(worker(*args.worker)))
        return 0
    started = time.perf_counter()
    loadavg_start = _loadavg()
    git_start = _git_info()
    workdir = Path(os.path.realpath(tempfile.mkdtemp(prefix="bundle-mcp-bench-")))
    ctx = Context(args, workdir)
    results: dict[str, Any] = {}
    try:
        for section in SECTIONS:
            if section.name not in args.sections:
                continue
            section_started = time.perf_counter()
            rows = section.run(ctx)
            results[section.name] = {"title": section.title, "rows": rows,
                                     **ctx.extras.get(section.name, {}),
                                     "wall_s": time.perf_counter() - section_started}
            print(f"\n### {section.title}\n")
            if section.render is not None:
                print(section.render(ctx, rows), flush=True)
            else:
                print(markdown_table(section, rows), flush=True)
    finally:
        if args.keep:
            _log(f"bundles kept in {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    today = datetime.date.today().isoformat()
    output = args.output or RESULTS_DIR / f"{today}.json"
    git = git_start | {"src_sha256_end": _git_info()["src_sha256"]}
    git["src_changed_during_run"] = git["src_sha256"] != git["src_sha256_end"]
    document = {
        "date": today,
        "git": git,
        "python": {"version": platform.python_version(),
                   "implementation": platform.python_implementation(),
                   "executable": sys.executable},
        "packages": _package_versions(),
        "machine": _machine(),
        "command": [sys.executable, *sys.argv],
        "worker_command": [sys.executable, "bench/run.py", "--worker", "SCENARIO", "BUNDLE"],
        "options": {"sizes": args.sizes, "repeat": args.repeat, "seed": args.seed,
                    "quick": args.quick, "corpora": args.corpora, "sections": args.sections},
        "bundles": [vars(b) | {"path": None} for b in ctx.bundles()] if ctx._bundles else [],
        "sections": results,
        "samples": ctx.samples,
        "wall_s": time.perf_counter() - started,
        "loadavg_1m": {"start": loadavg_start, "end": _loadavg()},
    }
    for result in results.values():
        result["run"] = {"command": document["command"], "git": git,
                         "options": document["options"]}
    _merge_earlier(document, output)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    shown = output.relative_to(REPO_DIR) if output.is_relative_to(REPO_DIR) else output
    print(f"\nresults: {shown}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
