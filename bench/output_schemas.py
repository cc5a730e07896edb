"""What the advertised output schemas cost a client: their bytes in tools/list, and the TypeScript
SDK's compile of them (issue 25, item 4).

    python bench/output_schemas.py [--dump FILE] [--against FILE] [--runs N]

Lists the tools through the real server's ``tools/list`` handler (every tool, in process) and
prints the bytes of every ``outputSchema`` as minified UTF-8 JSON, with the input schemas beside
them. With node and the pinned SDK in tests/ts/node_modules (``make ts-deps``) it then compiles
them as the SDK's client does after ``tools/list`` (its default Ajv validator, one schema per
tool) in ``--runs`` fresh node processes, each compile cold as in a host, and prints the median
wall and CPU time.

``--dump FILE`` writes the listed output schemas to FILE, ``{"tool": schema}``; ``--against FILE``
compiles such a dump too, alternating process by process with this checkout's, so both are
measured side by side under the same load. To compare with another checkout, dump there and
compare here::

    PYTHONPATH=/path/to/other/src python bench/output_schemas.py --dump /tmp/other.json
    python bench/output_schemas.py --against /tmp/other.json

A figure to read, never a test (bench/README.md).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import anyio
from mcp import Client

from bundle_mcp.dispatch import Dispatcher, ServeConfig
from bundle_mcp.server import build_server

REPO = Path(__file__).resolve().parent.parent
COMPILE_SCRIPT = REPO / "bench" / "ajv_compile.mjs"
SDK_DIR = REPO / "tests" / "ts" / "node_modules" / "@modelcontextprotocol" / "sdk"


def minified(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))


async def _listed() -> list[dict[str, Any]]:
    async with Client(build_server(Dispatcher(ServeConfig(allow_any_bundle=True)))) as client:
        tools = (await client.list_tools()).tools
    return [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools]


def _compile(node: str, schemas: Path) -> dict[str, float]:
    done = subprocess.run(
        [node, str(COMPILE_SCRIPT), str(SDK_DIR), str(schemas)],
        capture_output=True, text=True, timeout=300, check=True,
    )
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dump", type=Path, metavar="FILE",
                        help="write the listed output schemas to FILE and stop")
    parser.add_argument("--against", type=Path, metavar="FILE",
                        help="a --dump of another checkout, compiled side by side")
    parser.add_argument("--runs", type=int, default=7, help="fresh node processes per set")
    args = parser.parse_args()

    tools = anyio.run(_listed)
    schemas = {tool["name"]: tool["outputSchema"] for tool in tools}
    if args.dump is not None:
        args.dump.write_text(json.dumps(schemas), encoding="utf-8")
        total = sum(minified(schema) for schema in schemas.values())
        print(f"{len(schemas)} output schemas, {total:,} bytes: {args.dump}")
        return

    sets: dict[str, dict[str, Any]] = {"this checkout": schemas}
    if args.against is not None:
        sets[str(args.against)] = json.loads(args.against.read_text(encoding="utf-8"))
    inputs = sum(minified(tool["inputSchema"]) for tool in tools)
    print(f"{len(tools)} tools; inputSchema total {inputs:,} bytes")
    for label, listed in sets.items():
        total = sum(minified(schema) for schema in listed.values())
        largest = max(listed, key=lambda name: minified(listed[name]))
        print(f"outputSchema total {total:,} bytes ({label}); largest {largest} "
              f"{minified(listed[largest]):,}")

    node = shutil.which("node")
    if node is None or not (SDK_DIR / "package.json").is_file():
        print("no node or no tests/ts/node_modules (make ts-deps): compile time not measured")
        return
    sdk = json.loads((SDK_DIR / "package.json").read_text(encoding="utf-8"))["version"]
    samples: dict[str, list[dict[str, float]]] = {label: [] for label in sets}
    with tempfile.TemporaryDirectory() as tmp:
        files = {}
        for number, (label, listed) in enumerate(sets.items()):
            files[label] = Path(tmp) / f"set{number}.json"
            files[label].write_text(json.dumps(listed), encoding="utf-8")
        for _ in range(args.runs):
            for label in sets:  # alternating, so both sets meet the same load
                samples[label].append(_compile(node, files[label]))
    print(f"TypeScript SDK {sdk} compile of every outputSchema, cold, median of {args.runs} "
          "processes:")
    for label, runs in samples.items():
        wall = statistics.median(run["wall_ms"] for run in runs)
        cpu = statistics.median(run["cpu_ms"] for run in runs)
        print(f"  {label}: {wall:.0f} ms wall, {cpu:.0f} ms CPU")


if __name__ == "__main__":
    main()
