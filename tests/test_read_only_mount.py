"""A bundle on a real read-only mount: reads work, writes are refused up front, the parse cache
on a read-only folder falls back with one warning.

The checks run in tests/read_only_checks.py inside ``unshare --mount`` (a private mount
namespace, so the bind mounts never show outside it and vanish with it). Where the machine does
not allow that (not root, no unshare, a container without CAP_SYS_ADMIN) the test skips and
says why.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from bundle_mcp.dispatch import Dispatcher, ServeConfig
from bundle_mcp.storage import handles
from bundle_mcp.storage.refusals import os_failure, read_only_rejection

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "coffee-roastery"
CHECKS = Path(__file__).resolve().parent / "read_only_checks.py"
SKIP = 77
UNSHARE = ["unshare", "--mount", "--propagation", "private"]


def _namespaces_allowed() -> str | None:
    """Why a private mount namespace cannot be made here, or None."""
    if not sys.platform.startswith("linux"):
        return "read-only bind mounts are tested on Linux only"
    if os.geteuid() != 0:
        return "mounting needs root (run the tests as root to check a read-only mount)"
    for tool in ("unshare", "mount"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    done = subprocess.run([*UNSHARE, "true"], capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        return f"unshare --mount is not allowed here: {done.stderr.strip()}"
    return None


def test_a_bundle_on_a_read_only_mount_is_served_and_never_written(tmp_path: Path) -> None:
    reason = _namespaces_allowed()
    if reason is not None:
        pytest.skip(reason)
    base = Path(os.path.realpath(tmp_path))
    source, mounted = base / "source", base / "bundle"
    cache_source, cache_mounted = base / "cache-source", base / "cache"
    shutil.copytree(EXAMPLE, source)
    for folder in (mounted, cache_source, cache_mounted):
        folder.mkdir()
    before = sorted(p.relative_to(source).as_posix() for p in source.rglob("*"))

    env = {k: v for k, v in os.environ.items() if k != "BUNDLE_MCP_TOKEN"}
    done = subprocess.run(
        [*UNSHARE, sys.executable, str(CHECKS), str(source), str(mounted), str(cache_source),
         str(cache_mounted)],
        capture_output=True, text=True, timeout=300, env=env,
    )
    if done.returncode == SKIP:
        pytest.skip(f"a read-only bind mount is not possible here: {done.stderr.strip()}")
    assert done.returncode == 0, done.stdout + done.stderr
    summary = json.loads(done.stdout.splitlines()[-1])
    assert summary["write_message"].startswith("the bundle is on a read-only file system")

    # Outside the namespace: the copy under the mount was never touched, nothing was cached.
    assert sorted(p.relative_to(source).as_posix() for p in source.rglob("*")) == before
    assert not (source / ".bundle-mcp").exists()
    assert list(cache_source.iterdir()) == []
    assert list(mounted.iterdir()) == []  # the mount went away with the namespace


# Where mounting is not possible, the same decisions checked without a mount.


def test_a_write_is_refused_before_the_state_folder_is_made(
    tmp_bundle: Callable[..., str], monkeypatch: pytest.MonkeyPatch
) -> None:
    bundle = tmp_bundle({"index.md": "# Shop\n\n- [Orders](orders.md)\n",
                         "orders.md": "---\ntype: table\n---\n# Orders\n"})
    dispatcher = Dispatcher(ServeConfig(bundles=(bundle,)))
    monkeypatch.setattr(handles, "on_read_only_fs", lambda _fd: True)
    outcome = dispatcher.call(
        "write_concept", {"concept_id": "orders", "frontmatter": "type: table\n", "body": "x\n"}
    )
    assert outcome.is_error and outcome.structured["code"] == "operation_rejected"
    assert outcome.structured["message"].startswith("the bundle is on a read-only file system")
    assert not Path(bundle, ".bundle-mcp").exists()
    assert not dispatcher.call("list_concepts", {}).is_error


def test_erofs_met_later_reads_the_same() -> None:
    refused = os_failure("staging failed", OSError(errno.EROFS, "Read-only file system"))
    assert refused.code == "operation_rejected"
    assert refused.message == read_only_rejection().message
    other = os_failure("staging failed", OSError(errno.ENOSPC, "No space left"))
    assert "ENOSPC" in other.message
