"""The performance targets of issue 13, measured server-side over raw JSON-RPC (``make bench``).

For each generated bundle size (1,000 and ~10,000 concepts by default) this starts real
``bundle-mcp serve BUNDLE --http`` processes and speaks plain JSON-RPC over one keep-alive HTTP
connection (no SDK client, so no client-side validation), in three sessions:

1. **cold**: an empty parse-cache folder. Timed from the spawn: the first ``read_concept``
   answer, and ``ready`` (``/readyz`` answers 200: every bundle loaded and every derived
   structure built by the warm-up). Then, for every read tool: its first call and the median of
   ``--warm`` warm calls. Then one file edited, one created and one deleted, each followed by a
   timed call that must see the change. Then the peak RSS (``VmHWM``) of the server.
2. **restart**: a new process on the cache folder the cold session filled. ``ready`` again, and
   the first call of every read tool beside its warm median.
3. **throughput**: if ``bench/http_load.py`` is there, it drives 32 concurrent raw clients.

It prints one table per size with each target met or missed, the Go reference's figures quoted
in the issue beside ours, the growth from the smallest to the largest size, and writes every raw
sample to ``bench/results/<date>-targets.json``. Absolute times drift on a shared machine:
compare rows of one run.

    .venv/bin/python bench/targets.py                    # 1000 and 9978 concepts
    .venv/bin/python bench/targets.py --sizes 1000 --warm 5
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO_DIR = BENCH_DIR.parent
sys.path.insert(0, str(BENCH_DIR))

from generate import generate  # noqa: E402  (a sibling script)

MIB = 1024 * 1024
PROTOCOL = "2025-11-25"
READY_TIMEOUT_S = 600

# The Go reference (okf-mcp) on the same kind of 10k bundle, as measured and quoted in issue 13.
REFERENCE = {
    "cold_first_answer_s": 2.4,
    "single_call_s": 2.1,  # it re-reads the whole bundle on every call
    "get_semantic_graph_s": 3.6,
    "peak_rss_mib": 353.0,
}


@dataclass
class Case:
    label: str
    tool: str
    arguments: dict[str, Any]
    warm_target_s: float | None = None  # the warm target, where it names one


@dataclass
class Session:
    """One ``bundle-mcp serve BUNDLE`` process spoken to in raw JSON-RPC lines over stdio.

    Its log (``BUNDLE_MCP_LOG_LEVEL=info``) says when the warm-up has built everything: that
    line is the stdio server's "ready".
    """

    bundle: str
    cache_dir: str
    # Where the server's log goes: the run's temporary folder. (It used to land beside the cache
    # folder, which for a relative cache folder was the checkout, and one was committed.)
    log_dir: str
    started: float = 0.0
    process: subprocess.Popen[bytes] | None = None
    ids: int = 0
    log: Path | None = None

    def start(self) -> None:
        env = {**os.environ, "BUNDLE_MCP_CACHE_DIR": self.cache_dir,
               "BUNDLE_MCP_LOG_LEVEL": "info"}
        self.log = Path(self.log_dir) / f"server-{time.monotonic_ns()}.log"
        self.started = time.perf_counter()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "bundle_mcp.cli", "serve", self.bundle],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=open(self.log, "wb"), env=env,  # noqa: SIM115
        )
        self._send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": PROTOCOL, "capabilities": {},
            "clientInfo": {"name": "bench-targets", "version": "1"}}})
        self._receive()
        self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def call(self, tool: str, arguments: dict[str, Any]) -> tuple[float, bytes]:
        """Seconds from writing the request to reading the whole response line, and the line."""
        self.ids += 1
        start = time.perf_counter()
        self._send({"jsonrpc": "2.0", "id": self.ids, "method": "tools/call",
                    "params": {"name": tool, "arguments": arguments}})
        line = self._receive()
        return time.perf_counter() - start, line

    def wait_ready(self) -> float:
        """Seconds from the spawn until the log said the bundle is warm."""
        assert self.log is not None
        deadline = time.perf_counter() + READY_TIMEOUT_S
        while time.perf_counter() < deadline:
            if b" is warm: " in self.log.read_bytes():
                return time.perf_counter() - self.started
            time.sleep(0.01)
        raise RuntimeError(f"the server did not become ready; see {self.log}")

    def wait_warm_again(self, count: int) -> None:
        """Until the log has ``count`` warm-up lines (after an edit, the follow-up warm-up)."""
        assert self.log is not None
        deadline = time.perf_counter() + READY_TIMEOUT_S
        while self.log.read_bytes().count(b" is warm: ") < count:
            if time.perf_counter() > deadline:
                raise RuntimeError("the follow-up warm-up did not finish")
            time.sleep(0.02)

    def warm_lines(self) -> int:
        assert self.log is not None
        return self.log.read_bytes().count(b" is warm: ")

    def peak_rss_mib(self) -> float:
        assert self.process is not None
        with open(f"/proc/{self.process.pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
        return float("nan")

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(30)

    def _send(self, message: dict[str, Any]) -> None:
        assert self.process is not None and self.process.stdin is not None
        self.process.stdin.write((json.dumps(message) + "\n").encode())
        self.process.stdin.flush()

    def _receive(self) -> bytes:
        assert self.process is not None and self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the server closed stdout; see {self.log}")
        return line


def _is_error(body: bytes) -> bool:
    message = json.loads(body)
    return "error" in message or bool(message.get("result", {}).get("isError"))


def _concept_ids(bundle: Path) -> list[str]:
    return sorted(str(p.relative_to(bundle))[:-3] for p in bundle.rglob("*.md")
                  if p.name not in ("index.md", "log.md"))


def cases(bundle: Path, info: dict[str, Any]) -> list[Case]:
    ids = _concept_ids(bundle)
    middle = ids[len(ids) // 2]
    hub = info["hub"]
    rare = info["rare_word_example"]
    return [
        Case("read_concept", "read_concept", {"concept_id": middle}, 0.005),
        Case("get_neighbors", "get_neighbors", {"concept_id": hub, "limit": 100}, 0.005),
        Case("fetch_slice", "fetch_slice", {"entity_id": middle}, 0.005),
        Case("search_concepts (rare)", "search_concepts", {"query": rare, "limit": 20}, 0.030),
        Case("search_sections", "search_sections", {"query": "pipeline latency"}, None),
        Case("expand_neighbors d2 (hub)", "expand_neighbors",
             {"entity_ids": [hub], "depth": 2}, 0.020),
        Case("query_subgraph d2 (hub)", "query_subgraph",
             {"seed_ids": [hub], "depth": 2}, None),
        Case("list_concepts", "list_concepts", {}, 0.150),
        Case("get_semantic_graph", "get_semantic_graph", {}, 0.150),
        Case("validate_bundle", "validate_bundle", {"check_links": True, "check_orphans": True},
             None),
    ]


def measure_calls(session: Session, all_cases: list[Case], warm: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for case in all_cases:
        first, body = session.call(case.tool, case.arguments)
        samples = [session.call(case.tool, case.arguments)[0] for _ in range(warm)]
        out[case.label] = {"first_s": first, "warm_s": samples,
                           "warm_median_s": statistics.median(samples),
                           "bytes": len(body), "error": _is_error(body)}
    return out


def measure_edits(session: Session, bundle: Path, concept_id: str) -> dict[str, float]:
    """One edited, one created, one deleted file, each followed by the call that shows it.

    Between two changes the bench waits for the follow-up warm-up the previous change started,
    so each timed call meets a quiet server (an agent's next call usually does).
    """
    path = bundle / f"{concept_id}.md"
    original = path.read_bytes()
    out: dict[str, float] = {}

    def settle(before: int) -> None:
        session.wait_warm_again(before + 1)

    victim: Path | None = None
    kept = b""
    try:
        before = session.warm_lines()
        path.write_bytes(original + b"\nAn edit for the benchmark.\n")
        elapsed, body = session.call("read_concept", {"concept_id": concept_id})
        assert b"An edit for the benchmark." in body, "the edit was not seen"
        out["edited_s"] = elapsed
        settle(before)
        # Delete a file, then put it back: the bundle may sit at the 10,000-file cap, where a
        # created file would be refused.
        victim_id = next(p for p in _concept_ids(bundle) if p != concept_id)
        victim = bundle / f"{victim_id}.md"
        kept = victim.read_bytes()
        before = session.warm_lines()
        victim.unlink()
        elapsed, body = session.call("read_concept", {"concept_id": victim_id})
        assert _is_error(body), "the deletion was not seen"
        out["deleted_s"] = elapsed
        settle(before)
        before = session.warm_lines()
        victim.write_bytes(kept)
        elapsed, body = session.call("read_concept", {"concept_id": victim_id})
        assert not _is_error(body), body[:300]
        out["created_s"] = elapsed
        settle(before)
    finally:
        path.write_bytes(original)
        if victim is not None and not victim.exists():
            victim.write_bytes(kept)
    session.call("read_concept", {"concept_id": concept_id})
    return out


def one_parse_s(bundle: Path, concept_id: str) -> float:
    """In-process cost of parsing the edited file alone (the edit target is "50 ms + this")."""
    with tempfile.TemporaryDirectory() as tmp:
        target = Path(tmp, "one")
        (target / Path(concept_id).parent).mkdir(parents=True)
        shutil.copy(bundle / f"{concept_id}.md", target / f"{concept_id}.md")
        script = (
            "import time,sys\n"
            "from bundle_mcp.loader import load_bundle\n"
            "from bundle_mcp.cancel import CancelToken\n"
            "s,_=load_bundle(sys.argv[1],CancelToken())\n"
            "t=time.perf_counter()\n"
            "[d.markdown for d in s.documents.values()]\n"
            "s2,_=load_bundle(sys.argv[1],CancelToken())\n"
            "print(time.perf_counter()-t)\n"
        )
        env = {**os.environ, "BUNDLE_MCP_CACHE_DIR": "off"}
        result = subprocess.run([sys.executable, "-c", script, str(target)], env=env,
                                capture_output=True, text=True, check=True)
        return float(result.stdout.strip())


def start_only_s() -> float:
    """Spawn → ``initialize`` answered for a server of an empty bundle: imports and start-up,
    the part of every "ready" figure that no bundle work can remove."""
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "index.md").write_text("# Empty\n", encoding="utf-8")
        session = Session(tmp, "off", tmp)
        session.log = None
        started = time.perf_counter()
        env = {**os.environ, "BUNDLE_MCP_CACHE_DIR": "off"}
        process = subprocess.Popen(
            [sys.executable, "-m", "bundle_mcp.cli", "serve", tmp],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
        session.process = process
        session._send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": PROTOCOL, "capabilities": {},
            "clientInfo": {"name": "bench-targets", "version": "1"}}})
        session._receive()
        elapsed = time.perf_counter() - started
        session.stop()
        return elapsed


def pack_bytes(cache_dir: str) -> int:
    return sum(p.stat().st_size for p in Path(cache_dir).rglob("*") if p.is_file())


def wait_for_pack(cache_dir: str, timeout: float = 120.0) -> None:
    """Until the background parse-cache write finished (a pack exists, no temp file, quiet)."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        files = sorted((p.name, p.stat().st_size) for p in Path(cache_dir).rglob("*")
                       if p.is_file())
        done = files and not any(name.endswith(".tmp") for name, _ in files)
        if done and files == last:
            return
        last = files
        time.sleep(0.5)


def run_size(concepts: int, workdir: Path, warm: int, seed: int) -> dict[str, Any]:
    bundle = workdir / f"b{concepts}"
    info = generate(bundle, concepts=concepts, seed=seed)
    bundle_bytes = sum(p.stat().st_size for p in bundle.rglob("*.md"))
    all_cases = cases(bundle, info)
    cache_dir = str(workdir / f"cache{concepts}")
    os.makedirs(cache_dir)
    result: dict[str, Any] = {"concepts": concepts, "bundle_bytes": bundle_bytes,
                              "cache_dir": cache_dir, "info": info}

    cold = Session(str(bundle), cache_dir, str(workdir))
    cold.start()
    try:
        _, _ = cold.call("read_concept", all_cases[0].arguments)
        result["cold_first_answer_s"] = time.perf_counter() - cold.started
        result["cold_ready_s"] = cold.wait_ready()
        result["cold_calls"] = measure_calls(cold, all_cases, warm)
        wait_for_pack(cache_dir)
        edited = all_cases[0].arguments["concept_id"]
        result["edits"] = measure_edits(cold, bundle, edited)
        result["one_file_parse_s"] = one_parse_s(bundle, edited)
        result["peak_rss_mib"] = cold.peak_rss_mib()
    finally:
        cold.stop()
    wait_for_pack(cache_dir)
    result["cache_bytes"] = pack_bytes(cache_dir)

    result["start_s"] = start_only_s()
    restart = Session(str(bundle), cache_dir, str(workdir))
    restart.start()
    try:
        result["restart_ready_s"] = restart.wait_ready()
        result["restart_calls"] = measure_calls(restart, all_cases, warm)
        result["restart_peak_rss_mib"] = restart.peak_rss_mib()
    finally:
        restart.stop()
    result["throughput"] = throughput(bundle, cache_dir, all_cases[0].arguments["concept_id"])
    return result


def throughput(bundle: Path, cache_dir: str, concept_id: str) -> dict[str, Any] | None:
    loader = BENCH_DIR / "http_load.py"
    if not loader.exists():
        return None
    command = [sys.executable, str(loader), str(bundle), "--clients", "32", "--seconds", "10",
               "--concept", concept_id, "--json"]
    env = {**os.environ, "BUNDLE_MCP_CACHE_DIR": cache_dir}
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        return {"error": done.stderr[-2000:]}
    parsed: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return parsed


# --------------------------------------------------------------------------------------------
# Rendering


def ms(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    return f"{seconds * 1000:.1f} ms" if seconds < 1 else f"{seconds:.2f} s"


def verdict(ok: bool) -> str:
    return "met" if ok else "**missed**"


def render(results: list[dict[str, Any]]) -> str:
    lines: list[str] = []
    for r in results:
        bundle_mib = r["bundle_bytes"] / MIB
        lines += [f"### {r['concepts']:,} concepts ({bundle_mib:.1f} MiB of Markdown)", "",
                  "| figure | bundle-mcp | target | verdict | Go reference |",
                  "|---|---:|---:|---|---:|"]
        ref_single = REFERENCE["single_call_s"]

        def row(name: str, value: str, target: str, ok: bool | None, ref: str = "–",
                lines: list[str] = lines) -> None:
            lines.append(f"| {name} | {value} | {target} | "
                         f"{'–' if ok is None else verdict(ok)} | {ref} |")

        row("spawn → first answer (read_concept), no cache", ms(r["cold_first_answer_s"]),
            f"≤ {ref_single} s", r["cold_first_answer_s"] <= ref_single,
            f"{REFERENCE['cold_first_answer_s']} s")
        row("ready (every structure built), no cache", ms(r["cold_ready_s"]),
            f"≤ {ref_single} s", r["cold_ready_s"] <= ref_single)
        row("ready after a restart with the parse cache", ms(r["restart_ready_s"]), "≤ 1 s",
            r["restart_ready_s"] <= 1.0)
        row("… a server with no bundle: spawn → initialize answered", ms(r["start_s"]), "–",
            None)
        for label, call in r["cold_calls"].items():
            target = next((c for c in CASE_TARGETS if c[0] == label), None)
            warm_target = target[1] if target else None
            ok = None if warm_target is None else call["warm_median_s"] <= warm_target
            ref = f"{ref_single} s every call"
            if label == "get_semantic_graph":
                ref = f"{REFERENCE['get_semantic_graph_s']} s every call"
            err = " (error)" if call["error"] else ""
            row(f"{label}: warm median{err}", ms(call["warm_median_s"]),
                "–" if warm_target is None else f"≤ {ms(warm_target)}", ok, ref)
        for label, call in r["restart_calls"].items():
            warm = r["restart_calls"][label]["warm_median_s"]
            # A first call within a millisecond of its warm median passes however small it is.
            ok = call["first_s"] <= max(2 * warm, warm + 0.001)
            row(f"{label}: first call after a restart (cache)", ms(call["first_s"]),
                f"≤ 2 × {ms(warm)}", ok)
        parse = r["one_file_parse_s"]
        for key, what in (("edited_s", "one file edited"), ("created_s", "one file created"),
                          ("deleted_s", "one file deleted")):
            row(f"{what}: next answer", ms(r["edits"][key]), f"≤ 50 ms + {ms(parse)}",
                r["edits"][key] <= 0.050 + parse)
        rss_target = 4 * r["bundle_bytes"] / MIB
        row("peak RSS, every tool used, every structure built", f"{r['peak_rss_mib']:.0f} MiB",
            f"≤ {rss_target:.0f} MiB (4× bundle)", r["peak_rss_mib"] <= rss_target,
            f"{REFERENCE['peak_rss_mib']:.0f} MiB")
        row("parse cache on disk", f"{r['cache_bytes'] / MIB:.1f} MiB", "–", None)
        tp = r.get("throughput")
        if tp and "calls_per_s" in tp:
            row("HTTP read_concept, 32 clients: calls/s", f"{tp['calls_per_s']:.0f}", "≥ 400",
                tp["calls_per_s"] >= 400)
            row("HTTP read_concept, 32 clients: p99", ms(tp["p99_s"]), "≤ 100 ms",
                tp["p99_s"] <= 0.100)
        lines.append("")
    if len(results) > 1:
        small, large = results[0], results[-1]
        lines += [f"### Growth {small['concepts']:,} → {large['concepts']:,} concepts", "",
                  "| figure | small | large | × |", "|---|---:|---:|---:|"]

        def grow(name: str, a: float, b: float, unit: str = "s") -> None:
            text = (lambda v: ms(v)) if unit == "s" else (lambda v: f"{v:.0f} MiB")
            lines.append(f"| {name} | {text(a)} | {text(b)} | {b / a if a else float('nan'):.1f} |")

        grow("spawn → first answer, no cache", small["cold_first_answer_s"],
             large["cold_first_answer_s"])
        grow("ready, no cache", small["cold_ready_s"], large["cold_ready_s"])
        grow("ready, restart with cache", small["restart_ready_s"], large["restart_ready_s"])
        for label in small["cold_calls"]:
            grow(f"{label} warm", small["cold_calls"][label]["warm_median_s"],
                 large["cold_calls"][label]["warm_median_s"])
        for key in ("edited_s", "created_s", "deleted_s"):
            grow(key.replace("_s", ""), small["edits"][key], large["edits"][key])
        grow("peak RSS", small["peak_rss_mib"], large["peak_rss_mib"], unit="MiB")
        lines.append("")
    return "\n".join(lines)


CASE_TARGETS = (
    ("read_concept", 0.005), ("get_neighbors", 0.005), ("fetch_slice", 0.005),
    ("search_concepts (rare)", 0.030), ("expand_neighbors d2 (hub)", 0.020),
    ("list_concepts", 0.150), ("get_semantic_graph", 0.150),
)


# --------------------------------------------------------------------------------------------
# Profiles of what misses (stdlib cProfile in a fresh process: no extra dependency)

PROFILE_SCRIPT = """
import cProfile, io, json, os, pstats, sys
from bundle_mcp.dispatch import Dispatcher, ServeConfig
from bundle_mcp.readiness import Readiness
bundle, what, args = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
dispatcher = Dispatcher(ServeConfig(bundles=(bundle,)))
profile = cProfile.Profile()
if what == "ready":
    readiness = Readiness(dispatcher, follow=False)
    profile.runcall(readiness._run)
else:
    Readiness(dispatcher, follow=False)._run()
    dispatcher.call(what, args)
    profile.runcall(dispatcher.call, what, args)
out = io.StringIO()
pstats.Stats(profile, stream=out).sort_stats("cumulative").print_stats(int(sys.argv[4]))
print(out.getvalue())
"""


def profile_of(bundle: Path, cache_dir: str, what: str, arguments: dict[str, Any],
               top: int = 14) -> str:
    """The cumulative-time profile of one warm call (or of the whole warm-up: ``ready``)."""
    env = {**os.environ, "BUNDLE_MCP_CACHE_DIR": cache_dir}
    done = subprocess.run([sys.executable, "-c", PROFILE_SCRIPT, str(bundle), what,
                           json.dumps(arguments), str(top)],
                          capture_output=True, text=True, env=env, check=False)
    text = done.stdout if done.returncode == 0 else done.stderr[-3000:]
    lines = text.splitlines()
    start = next((n for n, line in enumerate(lines) if line.strip().startswith("ncalls")), 0)
    return "\n".join(lines[start:start + top + 1])


def misses(result: dict[str, Any], all_cases: list[Case]) -> list[tuple[str, dict[str, Any]]]:
    """What to profile: the warm-up when a ready target was missed, and each missed warm call."""
    out: list[tuple[str, dict[str, Any]]] = []
    if result["restart_ready_s"] > 1.0:
        out.append(("ready", {}))
    targets = dict(CASE_TARGETS)
    for case in all_cases:
        target = targets.get(case.label)
        if target is not None and result["cold_calls"][case.label]["warm_median_s"] > target:
            out.append((case.tool, case.arguments))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,9978",
                        help="concepts per bundle (9,978 + 22 index/log files = the file cap)")
    parser.add_argument("--warm", type=int, default=15)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--output", default=None)
    parser.add_argument("--no-profile", action="store_true",
                        help="skip the profiles of the missed targets (largest size)")
    args = parser.parse_args()
    results = []
    profiles: list[str] = []
    with tempfile.TemporaryDirectory(prefix="bundle-mcp-targets-") as tmp:
        for size in (int(s) for s in args.sizes.split(",")):
            print(f"measuring {size} concepts ...", file=sys.stderr)
            results.append(run_size(size, Path(tmp), args.warm, args.seed))
        if not args.no_profile and results:
            largest = results[-1]
            bundle = Path(tmp) / f"b{largest['concepts']}"
            for what, arguments in misses(largest, cases(bundle, largest["info"])):
                print(f"profiling {what} ...", file=sys.stderr)
                title = "the warm-up after a restart (cache)" if what == "ready" else (
                    f"a warm {what} {json.dumps(arguments)}")
                profiles.append(f"#### Profile: {title}\n\n```\n"
                                f"{profile_of(bundle, largest['cache_dir'], what, arguments)}"
                                f"\n```\n")
    print(render(results))
    if profiles:
        print(f"### Where the missed targets spend their time ({results[-1]['concepts']:,} "
              "concepts, cProfile, cumulative)\n")
        print("\n".join(profiles))
    output = Path(args.output) if args.output else (
        BENCH_DIR / "results" / f"{datetime.date.today().isoformat()}-targets.json")
    output.parent.mkdir(parents=True, exist_ok=True)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO_DIR, capture_output=True,
                            text=True, check=False).stdout.strip()
    output.write_text(json.dumps({"commit": commit, "argv": sys.argv, "results": results,
                                  "profiles": profiles}, indent=1, default=str),
                      encoding="utf-8")
    print(f"raw samples: {output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
