"""``/healthz`` and ``/readyz`` for probes, and the warm-up that ``/readyz`` waits for.

``/healthz`` is 200 while the process serves; ``/readyz`` is 503 until every bundle named on the
command line is loaded and its indexes built (:mod:`bundle_mcp.readiness`), then 200. Neither
needs the token, and neither says anything about a bundle.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from bundle_mcp import derived
from bundle_mcp.cancel import CancelToken
from bundle_mcp.dispatch import Dispatcher, ServeConfig
from bundle_mcp.readers import ALL_READER
from bundle_mcp.readiness import Readiness, saved_steps, warm_steps
from bundle_mcp.server import BearerTokenMiddleware, public_paths
from bundle_mcp.tools._section_index import SECTION_WORD_TOTALS
from bundle_mcp.validation import BUNDLE_FINDINGS, ORPHAN_FINDINGS

try:
    from tests.served import printed_url
except ImportError:  # pytest run without the repository root on sys.path
    from served import printed_url  # type: ignore[no-redef,import-not-found]

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = str(REPO / "examples" / "coffee-roastery")
WAIT_SECONDS = 60
INDEX = "# Shop\n\n- [Orders](orders.md)\n"
ORDERS = "---\ntype: table\ntitle: Orders\n---\n# Orders\n\nOne row per order.\n"
BROKEN = "---\ntype: table\ntitle: Orders\n# no closing fence\n"


# ------------------------------------------------------------------------- the ASGI routes


def _request(app: Any, method: str, path: str, headers: list[tuple[bytes, bytes]] | None = None
             ) -> tuple[int, dict[bytes, bytes], bytes]:
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "method": method, "path": path, "headers": headers or []}
    anyio.run(app, scope, receive, send)
    start = sent[0]
    body = b"".join(m.get("body", b"") for m in sent[1:])
    return start["status"], dict(start["headers"]), body


def _inner() -> tuple[Any, list[str]]:
    reached: list[str] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        reached.append(scope["path"])
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    return app, reached


def test_healthz_is_ok_and_readyz_follows_readiness() -> None:
    inner, reached = _inner()
    ready = [False]
    app = public_paths(BearerTokenMiddleware(inner, "s3cret"), lambda: ready[0])
    assert _request(app, "GET", "/healthz")[::2] == (200, b'{"status":"ok"}')
    status, headers, body = _request(app, "GET", "/readyz")
    assert (status, body) == (503, b'{"status":"not ready"}')
    assert headers[b"content-type"] == b"application/json"
    assert headers[b"cache-control"] == b"no-store"
    ready[0] = True
    assert _request(app, "GET", "/readyz")[::2] == (200, b'{"status":"ready"}')
    # HEAD: the same status without a body; other methods: 405.
    status, headers, body = _request(app, "HEAD", "/healthz")
    assert (status, body, headers[b"content-length"]) == (200, b"", b"15")
    status, headers, _ = _request(app, "POST", "/readyz")
    assert status == 405 and headers[b"allow"] == b"GET, HEAD"
    assert reached == []  # answered before the token check and the MCP app
    # Everything else still goes through the token check.
    assert _request(app, "GET", "/healthz/x")[0] == 401
    authorized = [(b"authorization", b"Bearer s3cret")]
    assert _request(app, "GET", "/mcp", authorized)[0] == 204
    assert reached == ["/mcp"]


def test_readyz_without_a_readiness_is_ready() -> None:
    inner, _ = _inner()
    assert _request(public_paths(inner), "GET", "/readyz")[0] == 200


# ------------------------------------------------------------------------- the warm-up


def test_the_warm_up_builds_what_the_first_calls_would(tmp_bundle: Callable[..., str]) -> None:
    bundle = tmp_bundle({"index.md": INDEX, "orders.md": ORDERS})
    dispatcher = Dispatcher(ServeConfig(bundles=(bundle,)))
    readiness = Readiness(dispatcher)
    assert not readiness.is_ready()
    readiness.start()
    try:
        assert readiness.wait(WAIT_SECONDS)
        snapshot = dispatcher.served_snapshot(bundle, CancelToken())
    finally:
        # A warm-up left following the bundle went on working under later tests (a memory
        # test in tests/test_parse_cache.py counted its allocations).
        readiness.stop()

    # The derived structures of the first calls are there already (the snapshot index says so).
    counts = derived.built(snapshot)
    for slot in (SECTION_WORD_TOTALS, ORPHAN_FINDINGS, BUNDLE_FINDINGS):
        assert counts[slot.name] > 0, f"the warm-up should have built {slot.name}"
    # It built them by their owners' builders: every slot that has one is a step of its own
    # (those built after the parse cache's save included).
    steps = {step.name for step in (*warm_steps(dispatcher, bundle, ALL_READER, snapshot),
                                    *saved_steps(snapshot))}
    assert {slot.name for slot in derived.slots() if slot.warm is not None} <= steps
    assert {f"answers {name}" for name in dispatcher.kept_answer_tools()} <= steps


def test_a_bundle_that_cannot_load_keeps_it_not_ready_and_is_logged_once(
    tmp_bundle: Callable[..., str], caplog: pytest.LogCaptureFixture
) -> None:
    bundle = tmp_bundle({"index.md": INDEX, "orders.md": BROKEN})
    dispatcher = Dispatcher(ServeConfig(bundles=(bundle,)))
    readiness = Readiness(dispatcher, retry_seconds=0.02)
    with caplog.at_level(logging.WARNING, logger="bundle_mcp.readiness"):
        readiness.start()
        try:
            assert not readiness.wait(1.0)  # about 50 attempts
            failures = [r.getMessage() for r in caplog.records if "cannot be served" in r.message]
            assert len(failures) == 1, failures
            assert "1 file(s) of the bundle cannot be parsed" in failures[0]
            Path(bundle, "orders.md").write_text(ORDERS, encoding="utf-8")
            assert readiness.wait(WAIT_SECONDS)  # retried: a fixed bundle becomes ready
        finally:
            readiness.stop()
    assert any("loaded: no longer waiting" in r.getMessage() for r in caplog.records)


def test_without_bundles_it_is_ready_at_once() -> None:
    dispatcher = Dispatcher(ServeConfig(allow_any_bundle=True))
    readiness = Readiness(dispatcher)
    readiness.start()
    try:
        assert readiness.is_ready()
    finally:
        readiness.stop()


def test_stop_ends_the_retries(tmp_bundle: Callable[..., str]) -> None:
    bundle = tmp_bundle({"index.md": INDEX, "orders.md": BROKEN})
    readiness = Readiness(Dispatcher(ServeConfig(bundles=(bundle,))), retry_seconds=0.02)
    readiness.start()
    readiness.stop()
    thread = readiness._thread
    assert thread is not None
    thread.join(WAIT_SECONDS)
    assert not thread.is_alive() and not readiness.is_ready()


# ------------------------------------------------------------------------- a real server


def _serve(args: list[str], log: Path) -> tuple[subprocess.Popen[bytes], str]:
    env = {k: v for k, v in os.environ.items() if k != "BUNDLE_MCP_TOKEN"}
    with log.open("wb") as stderr:  # the child keeps its own copy of the descriptor
        process = subprocess.Popen(
            [sys.executable, "-m", "bundle_mcp.cli", "serve", *args, "--http", "127.0.0.1:0"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr, env=env,
        )
    try:
        return process, printed_url(process, log, WAIT_SECONDS).removesuffix("/mcp")
    except AssertionError:
        process.kill()
        raise


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    process.wait(timeout=WAIT_SECONDS)


def test_a_served_bundle_becomes_ready_without_a_token(tmp_path: Path) -> None:
    process, base = _serve([EXAMPLE, "--token", "s3cret"], tmp_path / "serve.log")
    try:
        assert _get(base + "/healthz") == (200, b'{"status":"ok"}')
        deadline = time.monotonic() + WAIT_SECONDS
        while (answer := _get(base + "/readyz"))[0] != 200:
            assert answer == (503, b'{"status":"not ready"}')
            assert time.monotonic() < deadline, "never ready"
            time.sleep(0.05)
        assert answer == (200, b'{"status":"ready"}')
        assert _get(base + "/mcp")[0] == 401  # the MCP endpoint still wants the token
    finally:
        _stop(process)


def test_a_bundle_that_cannot_load_keeps_readyz_at_503(tmp_path: Path) -> None:
    bundle = tmp_path / "broken"
    bundle.mkdir()
    (bundle / "index.md").write_text(INDEX, encoding="utf-8")
    (bundle / "orders.md").write_text(BROKEN, encoding="utf-8")
    log = tmp_path / "serve.log"
    process, base = _serve([os.path.realpath(bundle)], log)
    try:
        deadline = time.monotonic() + WAIT_SECONDS
        while "cannot be served yet" not in log.read_text():
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
        for _ in range(5):
            status, body = _get(base + "/readyz")
            assert (status, json.loads(body)) == (503, {"status": "not ready"})
            assert _get(base + "/healthz")[0] == 200  # alive all the same
            time.sleep(0.1)
        assert log.read_text().count("cannot be served yet") == 1
    finally:
        _stop(process)


def test_any_bundle_without_bundles_is_ready_once_listening(tmp_path: Path) -> None:
    process, base = _serve(["--allow-any-bundle"], tmp_path / "serve.log")
    try:
        assert _get(base + "/readyz") == (200, b'{"status":"ready"}')
    finally:
        _stop(process)
