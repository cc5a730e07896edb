"""The server saves what it parsed to the persistent cache, after the call, in the background."""

from __future__ import annotations

import time
from pathlib import Path

from bundle_mcp.cancel import CancelToken
from bundle_mcp.loader.parse_cache import ParseCache
from bundle_mcp.snapshots import SnapshotCache
from toolcall import every_document_built


def test_a_served_snapshot_is_saved_and_reused(tmp_path: Path) -> None:
    root = tmp_path / "b"
    root.mkdir()
    for n in range(3):
        (root / f"c{n}.md").write_text(f"---\ntype: Note\ntitle: C{n}\n---\n# C{n}\n\nBody.\n")
    cache = ParseCache(tmp_path / "cache")
    served = SnapshotCache(parse_cache=cache)
    snapshot = served.get(str(root), CancelToken())
    # What a call or the warm-up built is saved; a document nothing has needed yet is not.
    every_document_built(snapshot.documents)
    served.persist(str(root), snapshot)
    deadline = time.monotonic() + 10
    while not cache.load(str(root)) and time.monotonic() < deadline:
        time.sleep(0.05)
    entries = cache.load(str(root))
    assert set(entries) == {"c0.md", "c1.md", "c2.md"}
    restarted = SnapshotCache(parse_cache=cache).get(str(root), CancelToken())
    assert restarted.revision == snapshot.revision
    assert all(doc.frontmatter is not None for doc in restarted.documents.values())


def test_a_save_asked_for_now_is_done_when_persist_returns(tmp_path: Path) -> None:
    # The warm-up saves this way before it says the bundle is warm: a server that says so has
    # no save running behind the calls that follow.
    root = tmp_path / "b"
    root.mkdir()
    for n in range(3):
        (root / f"c{n}.md").write_text(f"---\ntype: Note\ntitle: C{n}\n---\n# C{n}\n\nBody.\n")
    cache = ParseCache(tmp_path / "cache")
    served = SnapshotCache(parse_cache=cache)
    snapshot = served.get(str(root), CancelToken())
    every_document_built(snapshot.documents)
    served.persist(str(root), snapshot, now=True)
    assert set(cache.load(str(root))) == {"c0.md", "c1.md", "c2.md"}
