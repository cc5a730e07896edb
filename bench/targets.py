"""The performance targets of issue 13, measured server-side over raw JSON-RPC (``make bench``).

For each generated bundle size (1,000 and ~10,000 concepts by default) this starts real
``bundle-mcp serve BUNDLE`` processes and speaks plain JSON-RPC lines to them over stdio (no SDK
client, so no client-side validation), in three sessions:

1. **cold**: an empty parse-cache folder. Timed from the spawn: the first ``read_concept``
   answer, and ``ready`` (the server's log says the bundle is warm: every derived structure
   built by the warm-up). Then, for every read tool: its first call and the median of
   ``--warm`` warm calls. Then one file edited, one created and one deleted, each followed by a
   timed call that must see the change. Then the peak RSS (``VmHWM``) of the server.
2. **restart**: a new process on the cache folder the cold session filled. ``ready`` again, and
   the first call of every read tool beside its warm median.
3. **restart, at once**: another process on that folder, as a client that restarts a server
   meets it: its first answer (the load), a second call (which waits for the SDK's import),
   then each read tool's first call at once, while the warm-up is at work.
4. **throughput**: a ``serve --http`` process and 32 concurrent raw clients
   (``bench/http_load.py``).

Before the first spawn the served package's modules are compiled to bytecode
(:func:`compile_package`), as installing a wheel does: otherwise, where ``PYTHONDONTWRITEBYTECODE``
is set or the checkout's bytecode is stale, every spawned server compiles its own modules from
source again, and each spawn timing carries that (about 200 ms at start-up).

It prints one table per size with each target met or missed, the Go reference's figures quoted
in the issue beside ours, the growth from the smallest to the largest size, and writes every raw
sample to ``bench/results/<date>-targets.json``. Absolute times drift on a shared machine:
compare rows of one run.

    .venv/bin/python bench/targets.py                    # 1000 and 9978 concepts
    .venv/bin/python bench/targets.py --sizes 1000 --warm 5
"""

from __future__ import annotations

import argparse
import compileall
import datetime
import importlib.util
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO_DIR = BENCH_DIR.parent
sys.path.insert(0, str(BENCH_DIR))

from generate import generate  # noqa: E402  (a sibling script)

from bundle_mcp.limits import DEFAULT_CAPS  # noqa: E402

DEFAULT_MAX_FILES = DEFAULT_CAPS.max_files
DEFAULT_MAX_BYTES = DEFAULT_CAPS.max_bytes

MIB = 1024 * 1024
_REPLY_HEAD = re.compile(rb'\{"jsonrpc":"2\.0","id":(\d+),')
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
    # A question per call, none asked twice in one run (a question's stems are kept once
    # asked, in memory and across restarts): ``arguments`` hold the first, under ``asked_as``.
    questions: tuple[str, ...] = ()
    asked_as: str = "question"

    def arguments_for(self, call: int) -> dict[str, Any]:
        """The arguments of this case's ``call``-th call in a run (each session its own)."""
        if not self.questions:
            return self.arguments
        return {**self.arguments, self.asked_as: self.questions[call % len(self.questions)]}


# context asked something new each time, as an agent does: words of the generated bundle's
# vocabulary (bench/generate.py) in questions a person would write. Sixteen: the cold and the
# restart sessions ask six each, the servers of the calls at once one each.
NEW_QUESTIONS = (
    "how does the retry policy handle a failed export",
    "what threshold triggers an alert on a sensor",
    "who owns the customer invoice ledger",
    "why would a batch miss its deadline",
    "where is the schema of the event stream kept",
    "how is revenue forecast by region",
    "what limits the quota of each tenant",
    "how do replicas stay in step with the primary",
    "when does the nightly rollup run",
    "how are duplicate records merged",
    "which gateway routes traffic to an endpoint",
    "what does the freshness check look at in a dataset",
    "how are discounts applied to a price",
    "what happens when the cache is full",
    "how is the partition key of a shard chosen",
    "what does the audit history of a user track",
)
NEW_QUESTION = "context (a new question each call)"
# search_sections asked new words each time (AND of every word: two words of the generated
# bundle's vocabulary that sections hold together). A term's postings are kept once made, in
# memory and across restarts, so "search_sections" alone measures a question asked again.
NEW_SEARCHES = (
    "retry policy", "sensor threshold", "invoice ledger", "batch deadline", "schema stream",
    "tenant quota", "replica primary", "nightly rollup", "duplicate record",
    "gateway endpoint", "freshness dataset", "discount price", "cache capacity",
    "partition shard", "audit history", "export failure",
)
NEW_SEARCH = "search_sections (new words each call)"
# Where each session starts in NEW_QUESTIONS (measure_calls asks 1 + warm of them; each server
# of the calls at once asks one).
COLD_CALLS, RESTART_CALLS, AT_ONCE_CALLS = 0, 6, 12
# Servers that make the calls at once, one after the other: a first call meets whatever step
# the warm-up is at, and one such call varied by half from run to run; the row is the median.
AT_ONCE_RUNS = 3


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
    serve_args: tuple[str, ...] = ()  # the caps of a bundle past the default ones
    started: float = 0.0
    initialized_s: float = 0.0  # spawn → initialize answered
    process: subprocess.Popen[bytes] | None = None
    ids: int = 0
    log: Path | None = None

    def start(self) -> None:
        env = {**os.environ, "BUNDLE_MCP_CACHE_DIR": self.cache_dir,
               "BUNDLE_MCP_LOG_LEVEL": "info"}
        self.log = Path(self.log_dir) / f"server-{time.monotonic_ns()}.log"
        self.started = time.perf_counter()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "bundle_mcp.cli", "serve", self.bundle, *self.serve_args],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=open(self.log, "wb"), env=env,  # noqa: SIM115
        )
        self._send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": PROTOCOL, "capabilities": {},
            "clientInfo": {"name": "bench-targets", "version": "1"}}})
        self._receive()
        self.initialized_s = time.perf_counter() - self.started
        self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def call(self, tool: str, arguments: dict[str, Any]) -> tuple[float, bytes]:
        """Seconds from writing the request to reading the whole response line, and the line."""
        return self.request("tools/call", {"name": tool, "arguments": arguments})

    def request(self, method: str, params: dict[str, Any] | None = None
                ) -> tuple[float, bytes]:
        """:meth:`call` for any request (``ping``: the transport's floor)."""
        self.ids += 1
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": self.ids, "method": method}
        if params is not None:
            message["params"] = params
        start = time.perf_counter()
        self._send(message)
        line = self._reply_to(self.ids)
        return time.perf_counter() - start, line

    def _reply_to(self, request_id: int) -> bytes:
        """The response line to ``request_id``. Notifications the server sends meanwhile (a
        resource list that changed after an edit, a log message) are skipped: taken for the
        answer, they would time the wrong line and shift every later figure by one."""
        while True:
            line = self._receive()
            # The SDK writes a reply's id first: read it off the head, so a 30 MB answer is
            # not parsed by the client inside the timed span; any other line is small.
            head = _REPLY_HEAD.match(line)
            if head is not None:
                if int(head.group(1)) == request_id:
                    return line
            elif json.loads(line).get("id") == request_id:
                return line

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


def _error_code(body: bytes) -> str | None:
    """The error envelope's code (or the JSON-RPC error's), None for an answer."""
    message = json.loads(body)
    if "error" in message:
        return f"JSON-RPC {message['error'].get('code')}"
    result = message.get("result", {})
    if not result.get("isError"):
        return None
    return str((result.get("structuredContent") or {}).get("code", "error"))


def _concept_ids(bundle: Path) -> list[str]:
    return sorted(str(p.relative_to(bundle))[:-3] for p in bundle.rglob("*.md")
                  if p.name not in ("index.md", "log.md"))


def cases(bundle: Path, info: dict[str, Any]) -> list[Case]:
    ids = _concept_ids(bundle)
    middle = ids[len(ids) // 2]
    hub = info["hub"]
    rare = info["rare_word_example"]
    return [
        Case("read_concept", "read_concept", {"concept_id": middle}, 0.002),
        Case("get_neighbors", "get_neighbors", {"concept_id": hub, "limit": 100}, 0.005),
        Case("fetch_slice", "fetch_slice", {"entity_id": middle}, 0.005),
        Case("search_concepts (rare)", "search_concepts", {"query": rare, "limit": 20}, 0.030),
        Case("search_sections", "search_sections", {"query": "pipeline latency"}, None),
        Case(NEW_SEARCH, "search_sections", {"query": NEW_SEARCHES[0]}, None,
             questions=NEW_SEARCHES, asked_as="query"),
        Case("expand_neighbors d2 (hub)", "expand_neighbors",
             {"entity_ids": [hub], "depth": 2}, 0.020),
        Case("query_subgraph d2 (hub)", "query_subgraph",
             {"seed_ids": [hub], "depth": 2}, None),
        Case("list_concepts", "list_concepts", {}, 0.150),
        Case("get_semantic_graph", "get_semantic_graph", {}, 0.150),
        Case("validate_bundle", "validate_bundle", {"check_links": True, "check_orphans": True},
             None),
        Case("context", "context", {"question": "how is pipeline latency measured"}, 0.100),
        Case(NEW_QUESTION, "context", {"question": NEW_QUESTIONS[0]}, 0.100,
             questions=NEW_QUESTIONS),
    ]


def measure_calls(session: Session, all_cases: list[Case], warm: int, start: int = 0
                  ) -> dict[str, Any]:
    """Each case's first call and ``warm`` more; a case with questions asks its ``start``-th
    and those after it."""
    out: dict[str, Any] = {}
    for case in all_cases:
        first, body = session.call(case.tool, case.arguments_for(start))
        samples = [session.call(case.tool, case.arguments_for(start + 1 + k))[0]
                   for k in range(warm)]
        out[case.label] = {"first_s": first, "warm_s": samples,
                           "warm_median_s": statistics.median(samples),
                           "bytes": len(body), "error": _is_error(body),
                           "error_code": _error_code(body)}
    return out


def calls_at_once(bundle: Path, cache_dir: str, workdir: Path, serve_args: Sequence[str],
                  all_cases: list[Case], run: int = 0) -> dict[str, float]:
    """Each case's first call on a restarted server as a client meets it: after its first
    answer (the load) and a second call (which waits for the SDK's import), while the warm-up
    is still at work. The restart session times its first calls once the server is ready.
    ``run``: which of the :data:`AT_ONCE_RUNS` servers (each asks its own new question)."""
    session = Session(str(bundle), cache_dir, str(workdir), serve_args)
    session.start()
    try:
        session.call("read_concept", all_cases[0].arguments)
        session.call("read_concept", all_cases[0].arguments)
        return {case.label: session.call(case.tool, case.arguments_for(AT_ONCE_CALLS + run))[0]
                for case in all_cases}
    finally:
        session.stop()


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


def cold_neighbors_s(bundle: Path, workdir: Path, serve_args: Sequence[str],
                     all_cases: list[Case], concept_id: str | None = None) -> float:
    """Spawn → the first get_neighbors answered (the bench's case: the hub's, or
    ``concept_id``'s) by a server on an empty parse cache: the edges into one concept before
    any index exists, which a cold call reads from the files that may name it
    (``okf/mentions.py``)."""
    case = next(c for c in all_cases if c.tool == "get_neighbors")
    arguments = case.arguments if concept_id is None else {**case.arguments,
                                                           "concept_id": concept_id}
    cache = tempfile.mkdtemp(dir=workdir, prefix="cold-neighbors-")
    session = Session(str(bundle), cache, str(workdir), serve_args)
    session.start()
    try:
        session.call(case.tool, arguments)
        return time.perf_counter() - session.started
    finally:
        session.stop()


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


def compile_package(name: str = "bundle_mcp") -> Path:
    """Write the bytecode of every module of the package the servers import (the spawned
    ``python -m bundle_mcp.cli`` finds the same one: same interpreter, same environment), as a
    wheel's install does, so no spawn timing includes compiling the server from source.
    ``compileall`` writes it even under ``PYTHONDONTWRITEBYTECODE``, which only stops imports
    from writing it. The package's folder."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"no package {name!r} to compile")
    folder = Path(next(iter(spec.submodule_search_locations)))
    if not compileall.compile_dir(folder, quiet=1):
        raise RuntimeError(f"{folder} did not compile")
    return folder


def caps_arguments(files: int, size: int) -> tuple[str, ...]:
    """``serve`` options for a bundle past the default caps (10,000 files, 64 MiB), with room
    for the files the edit benchmark adds back; none for a bundle within them."""
    if files <= DEFAULT_MAX_FILES and size <= DEFAULT_MAX_BYTES:
        return ()
    return ("--max-files", str(max(DEFAULT_MAX_FILES, files + files // 5)),
            "--max-bytes", str(max(DEFAULT_MAX_BYTES, size + size // 4)))


def run_size(concepts: int, workdir: Path, warm: int, seed: int,
             checkpoint: Callable[[dict[str, Any]], None] = lambda result: None
             ) -> dict[str, Any]:
    """Every figure of one size; ``checkpoint`` gets the figures so far after each stage (a
    long run stopped by a timeout still leaves them)."""
    bundle = workdir / f"b{concepts}"
    print(f"  generating {concepts} concepts ...", file=sys.stderr)
    info = generate(bundle, concepts=concepts, seed=seed)
    markdown = list(bundle.rglob("*.md"))
    bundle_bytes = sum(p.stat().st_size for p in markdown)
    serve_args = caps_arguments(len(markdown), bundle_bytes)
    all_cases = cases(bundle, info)
    cache_dir = str(workdir / f"cache{concepts}")
    os.makedirs(cache_dir)
    result: dict[str, Any] = {"concepts": concepts, "bundle_bytes": bundle_bytes,
                              "cache_dir": cache_dir, "info": info,
                              "serve_args": list(serve_args)}

    checkpoint(result)
    print("  cold session ...", file=sys.stderr)
    cold = Session(str(bundle), cache_dir, str(workdir), serve_args)
    cold.start()
    try:
        result["cold_initialize_s"] = cold.initialized_s
        _, _ = cold.call("read_concept", all_cases[0].arguments)
        result["cold_first_answer_s"] = time.perf_counter() - cold.started
        result["cold_ready_s"] = cold.wait_ready()
        checkpoint(result)
        result["cold_calls"] = measure_calls(cold, all_cases, warm, COLD_CALLS)
        checkpoint(result)
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
    result["cold_neighbors_s"] = cold_neighbors_s(bundle, workdir, serve_args, all_cases)
    # The read_concept case's concept: a name of common words few files link to.
    result["cold_neighbors_middle_s"] = cold_neighbors_s(
        bundle, workdir, serve_args, all_cases, all_cases[0].arguments["concept_id"])
    checkpoint(result)
    print("  restart session ...", file=sys.stderr)
    restart = Session(str(bundle), cache_dir, str(workdir), serve_args)
    restart.start()
    try:
        result["restart_initialize_s"] = restart.initialized_s
        # Before the warm-up is done: what a client restarting the server waits for.
        _, _ = restart.call("read_concept", all_cases[0].arguments)
        result["restart_first_answer_s"] = time.perf_counter() - restart.started
        result["restart_ready_s"] = restart.wait_ready()
        result["restart_calls"] = measure_calls(restart, all_cases, warm, RESTART_CALLS)
        result["restart_peak_rss_mib"] = restart.peak_rss_mib()
    finally:
        restart.stop()
    checkpoint(result)
    print("  restart session, calls at once ...", file=sys.stderr)
    runs = [calls_at_once(bundle, cache_dir, workdir, serve_args, all_cases, run)
            for run in range(AT_ONCE_RUNS)]
    result["restart_at_once_runs"] = runs
    result["restart_at_once"] = {label: statistics.median(r[label] for r in runs)
                                 for label in runs[0]}
    checkpoint(result)
    print("  HTTP throughput ...", file=sys.stderr)
    result["throughput"] = throughput(bundle, cache_dir, serve_args)
    return result


def throughput(bundle: Path, cache_dir: str, serve_args: tuple[str, ...] = ()
               ) -> dict[str, Any] | None:
    """32 keep-alive HTTP clients calling read_concept for 10 s (bench/http_load.py)."""
    loader = BENCH_DIR / "http_load.py"
    if not loader.exists():
        return None
    with tempfile.TemporaryDirectory() as tmp:
        rows_file = Path(tmp, "rows.json")
        command = [sys.executable, str(loader), str(bundle), "--concurrency", "32",
                   "--duration", "10", "--json", str(rows_file),
                   *(f"--serve-arg={arg}" for arg in serve_args)]
        env = {**os.environ, "BUNDLE_MCP_CACHE_DIR": cache_dir}
        done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
        if not rows_file.exists():
            return {"error": done.stderr[-2000:]}
        row = json.loads(rows_file.read_text(encoding="utf-8"))[0]
    return {"calls_per_s": row["calls/s"], "p99_s": float(row["p99 ms"]) / 1000,
            "errors": row["errors"], "row": row}


# --------------------------------------------------------------------------------------------
# Figures, and how they compare with the previous committed results

# A figure is a regression when it is worse than the previous result by more than TOLERANCE of
# the previous value AND by more than its unit's floor: the machine is shared and noisy, and a
# millisecond call that takes two is noise, not a regression.
TOLERANCE = 0.20
FLOORS = {"s": 0.003, "MiB": 16.0, "calls/s": 20.0}


@dataclass(frozen=True)
class Figure:
    value: float
    unit: str  # "s", "MiB" or "calls/s"

    @property
    def higher_is_better(self) -> bool:
        return self.unit == "calls/s"

    def text(self) -> str:
        if self.unit == "s":
            return ms(self.value)
        return f"{self.value:.0f} {self.unit}" if self.unit == "MiB" else f"{self.value:.0f}"


@dataclass(frozen=True)
class Regression:
    name: str
    previous: Figure
    now: Figure

    def line(self) -> str:
        change = (self.now.value / self.previous.value - 1) if self.previous.value else math.inf
        return (f"- **regression**: {self.name}: {self.now.text()} (previous "
                f"{self.previous.text()}, {change:+.0%})")


def figures(r: dict[str, Any]) -> dict[str, Figure]:
    """Every figure of one size's result, by the name its table row shows. A result written by
    an older version of this script may lack some: those are left out."""
    out: dict[str, Figure] = {}

    def add(name: str, value: float | None, unit: str = "s") -> None:
        if value is not None and not (isinstance(value, float) and math.isnan(value)):
            out[name] = Figure(float(value), unit)

    add(SPAWN_INITIALIZE, r.get("cold_initialize_s"))
    add(FIRST_ANSWER, r.get("cold_first_answer_s"))
    add(COLD_NEIGHBORS, r.get("cold_neighbors_s"))
    add(COLD_NEIGHBORS_MIDDLE, r.get("cold_neighbors_middle_s"))
    add(READY, r.get("cold_ready_s"))
    add(RESTART_FIRST_ANSWER, r.get("restart_first_answer_s"))
    add(RESTART_READY, r.get("restart_ready_s"))
    add(EMPTY_START, r.get("start_s"))
    for label, call in r.get("cold_calls", {}).items():
        add(f"{label}: warm median", call["warm_median_s"])
    for label, call in r.get("restart_calls", {}).items():
        add(f"{label}: first call after a restart (cache)", call["first_s"])
    for label, seconds in r.get("restart_at_once", {}).items():
        add(f"{label}: {AT_ONCE}", seconds)
    for key, what in EDITS:
        add(f"{what}: next answer", r.get("edits", {}).get(key))
    add(PEAK_RSS, r.get("peak_rss_mib"), "MiB")
    if "cache_bytes" in r:
        add(CACHE_SIZE, r["cache_bytes"] / MIB, "MiB")
    tp = r.get("throughput") or {}
    if "calls_per_s" in tp:
        add(HTTP_RATE, tp["calls_per_s"], "calls/s")
        add(HTTP_P99, tp["p99_s"])
    return out


def regressions(previous: dict[str, Any], now: dict[str, Any],
                tolerance: float = TOLERANCE) -> list[Regression]:
    """The figures of ``now`` worse than in ``previous`` (two results of one size) by more
    than ``tolerance`` and by more than their unit's floor; figures only one has are skipped."""
    before, after = figures(previous), figures(now)
    found = []
    for name, figure in after.items():
        old = before.get(name)
        if old is None or old.unit != figure.unit:
            continue
        worse = old.value - figure.value if figure.higher_is_better else figure.value - old.value
        if worse > FLOORS[figure.unit] and worse > tolerance * abs(old.value):
            found.append(Regression(name, old, figure))
    return found


def rule_text() -> str:
    return (f"a figure is a regression when it is worse than the previous result by more than "
            f"{TOLERANCE:.0%} and by more than {FLOORS['s'] * 1000:.0f} ms, "
            f"{FLOORS['MiB']:.0f} MiB or {FLOORS['calls/s']:.0f} calls/s")


def committed_results(exclude: Path | None = None) -> list[Path]:
    """The committed ``*-targets*.json`` files, oldest first (their names start with the date):
    the runs at the file cap and the 50,000-concept runs (``-targets-50k.json``) alike, each
    size then compared with the newest run that measured it (:func:`previous_results`)."""
    listed = subprocess.run(["git", "ls-files", "bench/results/*-targets*.json"], cwd=REPO_DIR,
                            capture_output=True, text=True, check=False).stdout.split()
    paths = [REPO_DIR / name for name in sorted(listed)]
    return [p for p in paths if p.exists() and (exclude is None or p.resolve() != exclude)]


def previous_results(files: list[Path], sizes: list[int]) -> dict[int, tuple[str, dict[str, Any]]]:
    """For each size, the newest of ``files`` (oldest first) that measured it: (name, result)."""
    found: dict[int, tuple[str, dict[str, Any]]] = {}
    for path in files:
        try:
            results = json.loads(path.read_text(encoding="utf-8"))["results"]
        except (OSError, ValueError, KeyError):
            continue
        for result in results:
            if result.get("concepts") in sizes:
                found[result["concepts"]] = (path.name, result)
    return found


# --------------------------------------------------------------------------------------------
# Rendering

SPAWN_INITIALIZE = "spawn → initialize answered"
FIRST_ANSWER = "spawn → first answer (read_concept), no cache"
COLD_NEIGHBORS = "spawn → first get_neighbors (hub) answered, no cache"
COLD_NEIGHBORS_MIDDLE = "spawn → first get_neighbors (read_concept's concept), no cache"
READY = "ready (every structure built), no cache"
RESTART_READY = "ready after a restart with the parse cache"
RESTART_FIRST_ANSWER = "spawn → first answer (read_concept) after a restart with the parse cache"
EMPTY_START = "… a server with no bundle: spawn → initialize answered"
AT_ONCE = "first call after a restart, not waiting for ready"
PEAK_RSS = "peak RSS, every tool used, every structure built"
CACHE_SIZE = "parse cache on disk"
HTTP_RATE = "HTTP read_concept, 32 clients: calls/s"
HTTP_P99 = "HTTP read_concept, 32 clients: p99"
EDITS = (("edited_s", "one file edited"), ("created_s", "one file created"),
         ("deleted_s", "one file deleted"))


def restart_call_bound(warm_s: float) -> float:
    """Issue 29's bound on a tool's first call after a restart: ≤ 2× its warm median or ≤ 50 ms."""
    return max(2 * warm_s, 0.050)


def ms(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    return f"{seconds * 1000:.1f} ms" if seconds < 1 else f"{seconds:.2f} s"


def verdict(ok: bool) -> str:
    return "met" if ok else "**missed**"


def render(results: list[dict[str, Any]],
           previous: dict[int, tuple[str, dict[str, Any]]] | None = None) -> str:
    lines: list[str] = []
    previous = previous or {}
    for measured in results:
        # A partial result (a run stopped by a timeout) lacks some figures: their rows are left
        # out (figures() skips NaN).
        r = {"cold_first_answer_s": math.nan, "cold_ready_s": math.nan,
             "restart_ready_s": math.nan, "cold_calls": {}, "restart_calls": {},
             "one_file_parse_s": math.nan, "edits": dict.fromkeys(("edited_s", "created_s",
                                                                   "deleted_s"), math.nan),
             "peak_rss_mib": math.nan, **measured}
        bundle_mib = r["bundle_bytes"] / MIB
        before_name, before = previous.get(r["concepts"], ("–", {}))
        old = figures(before)
        caps = f"; served with {' '.join(r['serve_args'])}" if r.get("serve_args") else ""
        lines += [f"### {r['concepts']:,} concepts ({bundle_mib:.1f} MiB of Markdown{caps})", "",
                  f"Previous: {before_name}.", "",
                  "| figure | bundle-mcp | target | verdict | previous | Go reference |",
                  "|---|---:|---:|---|---:|---:|"]
        ref_single = REFERENCE["single_call_s"]
        now = figures(r)

        def row(name: str, target: str, ok: bool | None, ref: str = "–",
                lines: list[str] = lines, now: dict[str, Figure] = now,
                old: dict[str, Figure] = old, suffix: str = "") -> None:
            if name not in now:
                return
            was = old[name].text() if name in old else "–"
            lines.append(f"| {name}{suffix} | {now[name].text()} | {target} | "
                         f"{'–' if ok is None else verdict(ok)} | {was} | {ref} |")

        if "cold_initialize_s" in r:
            row(SPAWN_INITIALIZE, "≤ 300 ms", r["cold_initialize_s"] <= 0.300, "0.04 s")
        row(FIRST_ANSWER, f"≤ {ref_single} s", r["cold_first_answer_s"] <= ref_single,
            f"{REFERENCE['cold_first_answer_s']} s")
        if "cold_neighbors_s" in r:
            # Not one of the targets: the read_concept row's bound, the Go reference's
            # time for any call.
            row(COLD_NEIGHBORS, f"≤ {ref_single} s", r["cold_neighbors_s"] <= ref_single,
                f"{ref_single} s every call")
        if "cold_neighbors_middle_s" in r:
            row(COLD_NEIGHBORS_MIDDLE, f"≤ {ref_single} s",
                r["cold_neighbors_middle_s"] <= ref_single, f"{ref_single} s every call")
        row(READY, f"≤ {ref_single} s", r["cold_ready_s"] <= ref_single)
        if "restart_first_answer_s" in r:
            row(RESTART_FIRST_ANSWER, "≤ 500 ms", r["restart_first_answer_s"] <= 0.5)
        row(RESTART_READY, "≤ 1 s", r["restart_ready_s"] <= 1.0)
        row(EMPTY_START, "–", None)
        for label, call in r["cold_calls"].items():
            target = next((c for c in CASE_TARGETS if c[0] == label), None)
            warm_target = target[1] if target else None
            ok = None if warm_target is None else call["warm_median_s"] <= warm_target
            ref = f"{ref_single} s every call"
            if label == "get_semantic_graph":
                ref = f"{REFERENCE['get_semantic_graph_s']} s every call"
            row(f"{label}: warm median", "–" if warm_target is None else f"≤ {ms(warm_target)}",
                ok, ref, suffix=f" ({call.get('error_code') or 'error'})" if call["error"] else "")
        for label, call in r["restart_calls"].items():
            warm = r["restart_calls"][label]["warm_median_s"]
            # The target: twice the warm median, or 50 ms, whichever is larger.
            ok = call["first_s"] <= restart_call_bound(warm)
            row(f"{label}: first call after a restart (cache)",
                f"≤ max(2 × {ms(warm)}, 50 ms)", ok)
        for label, seconds in r.get("restart_at_once", {}).items():
            warm = r["restart_calls"].get(label, {}).get("warm_median_s")
            if warm is not None:
                row(f"{label}: {AT_ONCE}", f"≤ max(2 × {ms(warm)}, 50 ms)",
                    seconds <= restart_call_bound(warm))
        parse = r["one_file_parse_s"]
        for key, what in EDITS:
            row(f"{what}: next answer", f"≤ 50 ms + {ms(parse)}",
                r["edits"][key] <= 0.050 + parse)
        rss_target = 4 * r["bundle_bytes"] / MIB
        row(PEAK_RSS, f"≤ {rss_target:.0f} MiB (4× bundle)", r["peak_rss_mib"] <= rss_target,
            f"{REFERENCE['peak_rss_mib']:.0f} MiB")
        row(CACHE_SIZE, "–", None)
        tp = r.get("throughput")
        if tp and "calls_per_s" in tp:
            row(HTTP_RATE, "≥ 400", tp["calls_per_s"] >= 400)
            row(HTTP_P99, "≤ 100 ms", tp["p99_s"] <= 0.100)
        elif tp and "error" in tp:
            lines.append(f"| HTTP throughput | failed: {tp['error'].splitlines()[-1][:80]} "
                         "| – | – | – | – |")
        lines.append("")
        if before:
            found = regressions(before, r)
            lines.append(f"Regressions against {before_name} ({rule_text()}): "
                         f"{len(found) or 'none'}.")
            lines += [regression.line() for regression in found]
            lines.append("")
    if len(results) > 1:
        small, large = results[0], results[-1]
        lines += [f"### Growth {small['concepts']:,} → {large['concepts']:,} concepts", "",
                  "| figure | small | large | × |", "|---|---:|---:|---:|"]
        a_figs, b_figs = figures(small), figures(large)
        for name, a in a_figs.items():
            b = b_figs.get(name)
            if b is not None and name not in (EMPTY_START, HTTP_RATE):
                growth = b.value / a.value if a.value else float("nan")
                lines.append(f"| {name} | {a.text()} | {b.text()} | {growth:.1f} |")
        lines.append("")
    return "\n".join(lines)


CASE_TARGETS = (
    # Issue 29's targets where it names one (read_concept 2 ms, context 100 ms), else issue 13's.
    ("read_concept", 0.002), ("get_neighbors", 0.005), ("fetch_slice", 0.005),
    ("context", 0.100), (NEW_QUESTION, 0.100),
    ("search_concepts (rare)", 0.030), ("expand_neighbors d2 (hub)", 0.020),
    ("list_concepts", 0.150), ("get_semantic_graph", 0.150),
)


# --------------------------------------------------------------------------------------------
# Profiles of what misses (stdlib cProfile in a fresh process: no extra dependency)

PROFILE_SCRIPT = """
import cProfile, io, json, os, pstats, sys
from bundle_mcp.dispatch import Dispatcher, ServeConfig
from bundle_mcp.limits import Caps
from bundle_mcp.readiness import Readiness
bundle, what, args = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
caps = Caps(int(sys.argv[5]), int(sys.argv[6]))
dispatcher = Dispatcher(ServeConfig(bundles=(bundle,), caps=caps))
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
               serve_args: list[str], top: int = 14) -> str:
    """The cumulative-time profile of one warm call (or of the whole warm-up: ``ready``)."""
    env = {**os.environ, "BUNDLE_MCP_CACHE_DIR": cache_dir}
    options = dict(zip(serve_args[::2], serve_args[1::2], strict=True))
    files = options.get("--max-files", str(DEFAULT_MAX_FILES))
    size = options.get("--max-bytes", str(DEFAULT_MAX_BYTES))
    done = subprocess.run([sys.executable, "-c", PROFILE_SCRIPT, str(bundle), what,
                           json.dumps(arguments), str(top), files, size],
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
                        help="concepts per bundle (9,978 + 22 index/log files = the file cap; "
                        "a larger bundle is served with --max-files and --max-bytes to fit)")
    parser.add_argument("--warm", type=int, default=15)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--output", default=None)
    parser.add_argument("--no-profile", action="store_true",
                        help="skip the profiles of the missed targets (largest size)")
    parser.add_argument("--previous", type=Path, action="append", metavar="FILE",
                        help="results to compare with (repeatable; default: the committed "
                        "bench/results/*-targets.json, the newest that measured each size)")
    parser.add_argument("--render", type=Path, metavar="FILE",
                        help="measure nothing: print the tables of these raw results")
    args = parser.parse_args()
    if args.render is not None:
        results = json.loads(args.render.read_text(encoding="utf-8"))["results"]
        files = args.previous or committed_results(exclude=args.render.resolve())
        print(render(results, previous_results(files, [r["concepts"] for r in results])))
        return 0
    output = Path(args.output) if args.output else (
        BENCH_DIR / "results" / f"{datetime.date.today().isoformat()}-targets.json")
    sizes = [int(s) for s in args.sizes.split(",")]
    # Read before this run writes its own file (which may carry the same name as a previous).
    previous = previous_results(args.previous or committed_results(exclude=output.resolve()),
                                sizes)
    results: list[dict[str, Any]] = []
    profiles: list[str] = []
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO_DIR, capture_output=True,
                            text=True, check=False).stdout.strip()
    output.parent.mkdir(parents=True, exist_ok=True)
    compiled = str(compile_package())

    def write(results: list[dict[str, Any]], partial: bool) -> None:
        output.write_text(json.dumps({"commit": commit, "argv": sys.argv, "partial": partial,
                                      "bytecode_compiled": compiled,
                                      "results": results, "profiles": profiles},
                                     indent=1, default=str), encoding="utf-8")

    with tempfile.TemporaryDirectory(prefix="bundle-mcp-targets-") as tmp:
        for size in sizes:
            print(f"measuring {size} concepts ...", file=sys.stderr)
            results.append(run_size(size, Path(tmp), args.warm, args.seed,
                                    lambda partial: write([*results, partial], True)))
        if not args.no_profile and results:
            largest = results[-1]
            bundle = Path(tmp) / f"b{largest['concepts']}"
            for what, arguments in misses(largest, cases(bundle, largest["info"])):
                print(f"profiling {what} ...", file=sys.stderr)
                title = "the warm-up after a restart (cache)" if what == "ready" else (
                    f"a warm {what} {json.dumps(arguments)}")
                profile = profile_of(bundle, largest["cache_dir"], what, arguments,
                                     largest.get("serve_args", []))
                profiles.append(f"#### Profile: {title}\n\n```\n{profile}\n```\n")
    print(render(results, previous))
    if profiles:
        print(f"### Where the missed targets spend their time ({results[-1]['concepts']:,} "
              "concepts, cProfile, cumulative)\n")
        print("\n".join(profiles))
    write(results, False)
    print(f"raw samples: {output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
