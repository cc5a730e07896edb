"""``bundle-mcp serve git+file://…`` as a child process: it serves the repository's commit,
picks up a new commit on SIGHUP and on ``--refresh``, and refuses writes; asked over REST
(``POST /api/tools/<tool>``). Slow: a server process (tests/conftest.py SLOW_MODULES)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from served import printed_url, start_serve, stop

CONCEPT = "---\ntype: Guide\ntitle: {title}\n---\n# {title}\n"
WAIT_SECONDS = 60  # a bound on waiting for the refresh, not a timing assertion


def _git(repo: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update({"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1",
                "GIT_AUTHOR_NAME": "Ann", "GIT_AUTHOR_EMAIL": "ann@example.com",
                "GIT_COMMITTER_NAME": "Ann", "GIT_COMMITTER_EMAIL": "ann@example.com"})
    return subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True,
                          text=True, timeout=60).stdout.strip()


def _commit(repo: Path, relative: str, title: str) -> str:
    target = repo / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(CONCEPT.format(title=title), encoding="utf-8")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", f"add {title}")
    return _git(repo, "rev-parse", "HEAD")


def _call(base: str, tool: str, **arguments: Any) -> dict[str, Any]:
    request = urllib.request.Request(
        f"{base}/api/tools/{tool}", data=json.dumps(arguments).encode(),
        headers={"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            body: dict[str, Any] = json.load(response)
    except urllib.error.HTTPError as exc:
        body = json.load(exc)
    return body


def _served_commit(base: str) -> str:
    return str(_call(base, "bundle_summary")["structuredContent"]["source"]["commit"])


def _wait_for_commit(base: str, commit: str) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while _served_commit(base) != commit:
        assert time.monotonic() < deadline, f"the server never served {commit}"
        time.sleep(0.2)


@pytest.mark.parametrize("trigger", ["sighup", "refresh"])
def test_serve_from_git_follows_new_commits(tmp_path: Path, trigger: str) -> None:
    base_dir = Path(os.path.realpath(tmp_path))
    repo, cache = base_dir / "repo", base_dir / "cache"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    first = _commit(repo, "kb/notes/roast.md", "Roast")
    log = tmp_path / "serve.log"
    extra = ["--refresh", "0.5"] if trigger == "refresh" else []
    process = start_serve(log, f"git+file://{repo}@main#kb", "--http", "127.0.0.1:0", *extra,
                          BUNDLE_MCP_CACHE_DIR=str(cache))
    try:
        base = printed_url(process, log).removesuffix("/mcp")
        # The printed client configuration names the repository, not the cache's copy.
        assert f'"git+file://{repo}@main#kb"' in log.read_text()
        assert _served_commit(base) == first
        refused = _call(base, "write_concept", concept_id="notes/new",
                        frontmatter="type: Guide\n", body="x\n")
        assert refused["structuredContent"]["code"] == "operation_rejected"
        second = _commit(repo, "kb/notes/grind.md", "Grind")
        if trigger == "sighup":
            process.send_signal(signal.SIGHUP)
        _wait_for_commit(base, second)
        read = _call(base, "read_concept", concept_id="notes/grind")
        assert read["structuredContent"]["id"] == "notes/grind"
        assert process.poll() is None
    finally:
        stop(process)
    assert "refreshed" in log.read_text()
