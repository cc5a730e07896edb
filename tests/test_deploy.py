"""Running several replicas: the Kubernetes example, stateless HTTP behind one client, and the
Host names a Service or a proxy brings (``--allowed-host``)."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

try:
    from tests.served import printed_url, start_serve
except ImportError:  # pytest run without the repository root on sys.path
    from served import printed_url, start_serve  # type: ignore[no-redef,import-not-found]

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = str(REPO / "examples" / "coffee-roastery")
MANIFEST = REPO / "deploy" / "kubernetes.yaml"
WAIT_SECONDS = 60
TOKEN = "replica-token"
RAW_HEADERS = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2025-11-25",
}


# ------------------------------------------------------------------------- the manifest


def _documents() -> dict[str, dict[str, Any]]:
    documents = list(yaml.safe_load_all(MANIFEST.read_text(encoding="utf-8")))
    kinds = {doc["kind"]: doc for doc in documents}
    assert len(kinds) == len(documents) == 3
    return kinds


def test_the_kubernetes_example_probes_and_mounts_what_the_server_offers() -> None:
    kinds = _documents()
    deployment, service, secret = kinds["Deployment"], kinds["Service"], kinds["Secret"]
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()

    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"http": 8765}
    assert container["args"][:4] == ["serve", "/bundle", "--http", "0.0.0.0:8765"]
    ready, alive = container["readinessProbe"]["httpGet"], container["livenessProbe"]["httpGet"]
    assert (ready["path"], ready["port"]) == ("/readyz", "http")
    assert (alive["path"], alive["port"]) == ("/healthz", "http")

    mounts = {m["name"]: m for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    bundle = next(m for m in mounts.values() if m["mountPath"] == "/bundle")
    assert bundle["readOnly"] is True
    assert volumes[bundle["name"]]["persistentVolumeClaim"]["readOnly"] is True
    cache = next(m for m in mounts.values() if m["mountPath"] == "/var/cache/bundle-mcp")
    assert not cache.get("readOnly") and "emptyDir" in volumes[cache["name"]]
    assert "--read-only" in container["args"]  # the write tools could never succeed there

    env = {e["name"]: e for e in container["env"]}
    ref = env["BUNDLE_MCP_TOKEN"]["valueFrom"]["secretKeyRef"]
    assert ref["name"] == secret["metadata"]["name"] and ref["key"] in secret["stringData"]
    allowed = env["BUNDLE_MCP_ALLOWED_HOSTS"]["value"].split(",")
    assert f"{service['metadata']['name']}:*" in allowed

    security = pod["securityContext"]
    assert security["runAsNonRoot"] is True and security["runAsUser"] == 10001
    assert container["securityContext"]["readOnlyRootFilesystem"] is True

    assert service["spec"]["selector"].items() <= labels.items()
    assert service["spec"]["ports"][0]["targetPort"] == "http"


def test_the_manifest_matches_the_dockerfile() -> None:
    dockerfile = (REPO / "Dockerfile").read_text(encoding="utf-8")
    pod = _documents()["Deployment"]["spec"]["template"]["spec"]
    assert f"USER {pod['securityContext']['runAsUser']}:" in dockerfile
    assert "BUNDLE_MCP_CACHE_DIR=/var/cache/bundle-mcp" in dockerfile
    assert 'CMD ["serve", "/bundle", "--http", "0.0.0.0:8765"]' in dockerfile


# ------------------------------------------------------------------------- two replicas


def _url(process: subprocess.Popen[bytes], log: Path) -> str:
    return printed_url(process, log, WAIT_SECONDS)


@pytest.fixture
def replicas(tmp_path: Path) -> Iterator[list[str]]:
    processes = []
    try:
        for n in range(2):
            log = tmp_path / f"replica{n}.log"
            process = start_serve(log, EXAMPLE, "--http", "127.0.0.1:0", BUNDLE_MCP_TOKEN=TOKEN)
            processes.append((process, log))
        yield [_url(process, log) for process, log in processes]
    finally:
        for process, _ in processes:
            process.terminate()
        for process, _ in processes:
            process.wait(timeout=WAIT_SECONDS)


def _post(url: str, message: dict[str, Any], headers: dict[str, str] | None = None
          ) -> tuple[int, dict[str, str], Any]:
    all_headers = {**RAW_HEADERS, "Authorization": f"Bearer {TOKEN}", **(headers or {})}
    request = urllib.request.Request(
        url, json.dumps(message).encode(), all_headers, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            body = response.read()
            return response.status, dict(response.headers), json.loads(body) if body else None
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), None


INITIALIZE: dict[str, Any] = {
    "jsonrpc": "2.0", "id": 0, "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {},
               "clientInfo": {"name": "replica-test", "version": "0"}},
}
CONVERSATION: list[dict[str, Any]] = [
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
    {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
     "params": {"name": "search_concepts", "arguments": {"query": "guji", "limit": 5}}},
    {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
     "params": {"name": "read_concept", "arguments": {"concept_id": "beans/ethiopia-guji"}}},
    {"jsonrpc": "2.0", "id": 4, "method": "tools/call",
     "params": {"name": "search_sections", "arguments": {"query": "roast", "limit": 3}}},
    {"jsonrpc": "2.0", "id": 5, "method": "tools/call",
     "params": {"name": "read_concept", "arguments": {"concept_id": "no/such"}}},
    {"jsonrpc": "2.0", "id": 6, "method": "tools/call",
     "params": {"name": "get_neighbors", "arguments": {"concept_id": "beans/ethiopia-guji"}}},
    {"jsonrpc": "2.0", "id": 7, "method": "ping"},
]


def test_any_replica_answers_any_request(replicas: list[str]) -> None:
    """One client, two servers: initialize on one, every later request on the other in turn."""
    first, second = replicas
    status, headers, initialized = _post(first, INITIALIZE)
    assert status == 200 and "result" in initialized, initialized
    assert not any(k.lower() == "mcp-session-id" for k in headers), "stateless: no session"
    answers: list[tuple[Any, Any]] = []
    for n, message in enumerate(CONVERSATION):
        here, there = (second, first) if n % 2 == 0 else (first, second)
        status, _, reply = _post(here, message)
        if "id" not in message:
            assert status == 202 and reply is None
            continue
        assert status == 200 and reply.get("id") == message["id"], reply
        assert "error" not in reply, reply
        # The same request on the other replica: the same answer, byte for byte.
        assert _post(there, message)[2] == reply
        answers.append((message, reply))
    results = {m["id"]: r["result"] for m, r in answers}
    assert not results[2]["isError"] and results[2]["structuredContent"]["hits"]
    assert results[5]["isError"] and results[5]["structuredContent"]["code"] == "concept_not_found"
    assert _post(second, INITIALIZE)[2] == initialized


# ------------------------------------------------------------------------- --allowed-host


def test_allowed_hosts_let_a_service_name_through(tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    process = start_serve(
        log, EXAMPLE, "--http", "127.0.0.1:0", "--allowed-host", "bundle-mcp:*",
        "--allowed-host", "docs.example.internal:443", BUNDLE_MCP_TOKEN=TOKEN,
    )
    try:
        url = _url(process, log)
        ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        for host, origin, expected in (
            ("bundle-mcp:8765", None, 200),
            ("bundle-mcp:30001", "http://bundle-mcp:30001", 200),
            ("docs.example.internal:443", "https://docs.example.internal:443", 200),
            ("docs.example.internal:444", None, 421),
            ("evil.example:8765", None, 421),
            ("bundle-mcp:8765", "http://evil.example", 403),
        ):
            headers = {"Host": host, **({"Origin": origin} if origin else {})}
            assert _post(url, ping, headers)[0] == expected, (host, origin)
    finally:
        process.terminate()
        process.wait(timeout=WAIT_SECONDS)


def test_allowed_hosts_come_from_the_environment_too(tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    process = start_serve(
        log, EXAMPLE, "--http", "127.0.0.1:0", BUNDLE_MCP_TOKEN=TOKEN,
        BUNDLE_MCP_ALLOWED_HOSTS="bundle-mcp:*, bundle-mcp.default.svc:*",
    )
    try:
        url = _url(process, log)
        ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        assert _post(url, ping, {"Host": "bundle-mcp.default.svc:8765"})[0] == 200
        assert _post(url, ping, {"Host": "bundle-mcp.other.svc:8765"})[0] == 421
    finally:
        process.terminate()
        process.wait(timeout=WAIT_SECONDS)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--allowed-host", "x:1"], "--allowed-host applies to --http only"),
        (["--http", "127.0.0.1:0", "--allowed-host", "a b"], "is not a Host header value"),
    ],
)
def test_allowed_host_usage_errors(args: list[str], message: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bundle_mcp.cli", "serve", EXAMPLE, *args],
        capture_output=True, text=True, timeout=WAIT_SECONDS,
    )
    assert done.returncode == 2 and message in done.stderr, done.stderr
