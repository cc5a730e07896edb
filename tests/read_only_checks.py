"""The checks of tests/test_read_only_mount.py, run inside a private mount namespace.

``unshare --mount --propagation private python read_only_checks.py SRC MNT CACHE_SRC CACHE_MNT``:
bind-mounts a copy of a bundle (and an empty parse-cache folder) read-only, then serves the
mounted bundle in this process and as a real ``bundle-mcp serve --http``. Exit 0: every check
passed (a JSON summary on stdout); exit 77: this machine does not allow the mount (the reason
on stderr, and the test skips); anything else: a failed check. The mounts vanish with the
namespace when the process ends.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import queue
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from bundle_mcp.cancel import CancelToken
from bundle_mcp.dispatch import Dispatcher, ServeConfig
from bundle_mcp.loader.parse_cache import ParseCache
from bundle_mcp.snapshots import SnapshotCache

SKIP = 77
RAW_HEADERS = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2025-11-25",
}
READ_ONLY = "the bundle is on a read-only file system"


def mount_read_only(source: str, target: str) -> None:
    for argv in (
        ["mount", "--bind", source, target],
        ["mount", "-o", "remount,bind,ro", target],
    ):
        done = subprocess.run(argv, capture_output=True, text=True)
        if done.returncode != 0:
            print(f"{' '.join(argv)}: {done.stderr.strip()}", file=sys.stderr)
            raise SystemExit(SKIP)
    if not os.statvfs(target).f_flag & os.ST_RDONLY:
        print(f"{target} is not reported read-only after the remount", file=sys.stderr)
        raise SystemExit(SKIP)


class Writes:
    """Audit hook: every mkdir, and every open for writing, this process attempts."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []
        self.armed = False

    def __call__(self, event: str, args: tuple[Any, ...]) -> None:
        if not self.armed:
            return
        if event == "os.mkdir":
            self.seen.append(("mkdir", str(args[0])))
        elif event == "open" and isinstance(args[2], int) and args[2] & (
            os.O_WRONLY | os.O_RDWR | os.O_CREAT
        ):
            self.seen.append(("open", str(args[0])))


class Warnings(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(f"{record.name}: {record.getMessage()}")


def check(condition: bool, what: str) -> None:
    if not condition:
        raise AssertionError(what)


# The snapshot cache starts each background parse-cache save on a timer thread of this name.
SAVE_THREAD = "bundle-mcp-parse-cache"


def wait_for_parse_cache_saves(timeout: float = 30.0) -> None:
    """Wait until every parse-cache save started so far has run (its timer thread ended).

    Each call that makes the cache worth saving starts the timer before it returns, so after
    the calls every save they asked for is one of these threads.
    """
    deadline = time.monotonic() + timeout
    for thread in threading.enumerate():
        if thread.name == SAVE_THREAD:
            thread.join(max(0.0, deadline - time.monotonic()))
            check(not thread.is_alive(), "a background parse-cache save never finished")


def read_until(stream: Any, needle: str, timeout: float) -> list[str]:
    """The lines a child process writes to ``stream`` up to the first holding ``needle``.

    A thread reads them (a read blocks) and hands each over, so the wait has a deadline.
    """
    handed: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        for raw in iter(stream.readline, b""):
            line = raw.decode("utf-8", "replace")
            handed.put(line)
            if needle in line:
                return
        handed.put("")  # the end of the stream

    threading.Thread(target=pump, name="read-until", daemon=True).start()
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    while not lines or needle not in lines[-1]:
        try:
            line = handed.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            raise AssertionError(f"no line with {needle!r} within {timeout} s: {lines}") from None
        check(bool(line), f"the process closed its output before {needle!r}: {lines}")
        lines.append(line)
    return lines


def in_process(mnt: str, cache_mnt: str) -> dict[str, Any]:
    warnings = Warnings()
    logging.getLogger("bundle_mcp").addHandler(warnings)
    writes = Writes()
    sys.addaudithook(writes)

    dispatcher = Dispatcher(
        ServeConfig(bundles=(mnt,)),
        cache=SnapshotCache(parse_cache=ParseCache(Path(cache_mnt))),
    )
    reads: dict[str, dict[str, Any]] = {
        "list_concepts": {},
        "search_concepts": {"query": "guji", "limit": 5},
        "search_sections": {"query": "roast", "limit": 5},
        "read_concept": {"concept_id": "beans/ethiopia-guji"},
        "get_neighbors": {"concept_id": "beans/ethiopia-guji"},
        "validate_bundle": {"check_links": True},
        "get_semantic_graph": {},
        "bundle_summary": {},
        "expand_neighbors": {"entity_ids": ["beans/ethiopia-guji"]},
    }
    for name, arguments in reads.items():
        outcome = dispatcher.call(name, arguments)
        check(not outcome.is_error, f"{name} failed on the read-only bundle: {outcome.text}")
    wait_for_parse_cache_saves()  # the first save starts a second after a call, in the background

    operations = [{"kind": "set_lifecycle", "concept_id": "beans/ethiopia-guji",
                   "lifecycle": {"status": "deprecated", "stale_after": None}}]
    preview = dispatcher.call(
        "preview_concept_patch", {"actor": "human:ann", "operations": operations}
    )
    check(not preview.is_error, f"a preview writes nothing, so it works: {preview.text}")
    writes.armed = True
    rejected = [
        dispatcher.call("write_concept", {
            "concept_id": "beans/new-lot", "frontmatter": "type: bean\ntitle: New lot\n",
            "body": "# New lot\n",
        }),
        dispatcher.call("apply_concept_patch", {
            "actor": "human:ann", "operations": operations,
            "expected_revision": preview.structured["base_revision"],
            "expected_plan_digest": preview.structured["plan_digest"],
        }),
    ]
    writes.armed = False
    for outcome in rejected:
        check(outcome.is_error, f"a write on a read-only bundle succeeded: {outcome.text}")
        check(outcome.structured["code"] == "operation_rejected", outcome.text)
        check(outcome.structured["message"].startswith(READ_ONLY), outcome.text)
        check(mnt not in outcome.text, "the message names no host path")
    # The bundle's write path works relative to the pinned root's descriptor (relative names);
    # anything else absolute is this interpreter's own business (bytecode, the parse cache).
    bundle_writes = [
        w for w in writes.seen if not os.path.isabs(w[1]) or w[1].startswith(mnt + os.sep)
    ]
    check(not bundle_writes, f"writes were attempted under the bundle: {bundle_writes}")
    check(not os.path.exists(os.path.join(mnt, ".bundle-mcp")), "no state folder")

    # More calls after the first failed save: still one warning, never one per call.
    for _ in range(3):
        for name, arguments in reads.items():
            check(not dispatcher.call(name, arguments).is_error, name)
    wait_for_parse_cache_saves()  # any save these calls started has run, and warned or not
    cache = ParseCache(Path(cache_mnt))
    snapshot = dispatcher.served_snapshot(mnt, CancelToken())
    for _ in range(3):
        cache.save(mnt, snapshot.documents)  # a second cache object: its own single warning
    cache_warnings = [m for m in warnings.messages if "parse cache" in m]
    check(len(cache_warnings) == 2, f"one warning per parse cache: {warnings.messages}")
    check("EROFS" in cache_warnings[0], cache_warnings[0])
    return {
        "reads": sorted(reads),
        "write_message": rejected[0].structured["message"],
        "parse_cache_warnings": cache_warnings,
    }


def over_http(mnt: str, cache_mnt: str) -> dict[str, Any]:
    env = {**os.environ, "BUNDLE_MCP_CACHE_DIR": cache_mnt}
    env.pop("BUNDLE_MCP_TOKEN", None)
    process = subprocess.Popen(
        [sys.executable, "-m", "bundle_mcp.cli", "serve", mnt, "--http", "127.0.0.1:0"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env,
    )
    assert process.stderr is not None
    seen: list[str] = []  # every line read before the end: the warm-up may log before listening
    try:
        url = ""
        deadline = time.monotonic() + 60
        while not url:
            line = process.stderr.readline().decode("utf-8", "replace")
            check(bool(line) and time.monotonic() < deadline, "the server never listened")
            seen.append(line)
            if "streamable HTTP on " in line:
                url = line.split()[-1]
        base = url.removesuffix("/mcp")
        while True:
            try:
                with urllib.request.urlopen(base + "/readyz", timeout=10) as response:
                    check(response.status == 200, "ready")
                    break
            except urllib.error.HTTPError as exc:
                check(exc.code == 503, f"/readyz answered {exc.code}")
            check(time.monotonic() < deadline, "never ready on the read-only bundle")
            time.sleep(0.1)
        results = {}
        for n, (name, arguments) in enumerate((
            ("search_concepts", {"query": "guji", "limit": 1}),
            ("write_concept", {"concept_id": "x", "frontmatter": "type: t\n", "body": "x\n"}),
        )):
            body = {"jsonrpc": "2.0", "id": n, "method": "tools/call",
                    "params": {"name": name, "arguments": arguments}}
            request = urllib.request.Request(
                url, data=json.dumps(body).encode(), headers=RAW_HEADERS, method="POST"
            )
            with urllib.request.urlopen(request, timeout=60) as response:
                results[name] = json.loads(response.read())["result"]
        check(not results["search_concepts"]["isError"], str(results))
        envelope = results["write_concept"]["structuredContent"]
        check(results["write_concept"]["isError"], str(results))
        check(envelope["code"] == "operation_rejected", str(envelope))
        check(envelope["message"].startswith(READ_ONLY), str(envelope))
        # The background parse-cache save fails on the read-only cache folder and says so.
        seen += read_until(process.stderr, "parse cache", 30)
    finally:
        process.terminate()
        _, err = process.communicate(timeout=60)
    log = "".join(seen) + err.decode("utf-8", "replace")
    warnings = [line for line in log.splitlines() if "WARNING" in line]
    cache_warnings = [line for line in warnings if "parse cache" in line]
    check(len(cache_warnings) == 1, f"one parse-cache warning: {log}")
    check(any("read-only file system" in line for line in warnings), log)
    check(len(warnings) == 2, f"no other warning: {log}")
    return {"server_warnings": warnings}


def main() -> int:
    src, mnt, cache_src, cache_mnt = sys.argv[1:5]
    mount_read_only(src, mnt)
    mount_read_only(cache_src, cache_mnt)
    try:
        with open(os.path.join(mnt, "probe"), "w"):
            pass
    except OSError as exc:
        if exc.errno != errno.EROFS:
            raise
    else:
        print("a file could be created on the read-only mount", file=sys.stderr)
        return SKIP
    summary = in_process(mnt, cache_mnt)
    summary.update(over_http(mnt, cache_mnt))
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
