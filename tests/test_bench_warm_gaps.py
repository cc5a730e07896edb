"""``bench/warm_gaps.py``: each warm step's time and the longest stretches between two checks
of its token. Nothing here compares a figure with a bound; the shape of the answer is checked."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from bench_module import bench_module
from bundle_mcp.cancel import CancelToken
from bundle_mcp.errors import BundleError

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "coffee-roastery"


@pytest.fixture(scope="module")
def warm_gaps() -> Iterator[ModuleType]:
    yield from bench_module("warm_gaps")


def test_a_cold_run_fills_the_cache_and_the_next_is_a_restart(
    warm_gaps: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    bundle = tmp_path / "bundle"
    shutil.copytree(EXAMPLE, bundle)
    monkeypatch.setenv("BUNDLE_MCP_CACHE_DIR", str(tmp_path / "unused"))  # restored after
    cache = tmp_path / "cache"
    for kind in ("cold start (parse cache saved)", "restart"):
        assert warm_gaps.main([str(bundle), "--cache", str(cache), "--longest", "2"]) == 0
        out = capsys.readouterr().out
        assert out.startswith(f"warm-up steps of a {kind}")
        rows = [line.split(" | ") for line in out.splitlines() if line.startswith("| ")][1:]
        names = [row[0].removeprefix("| ") for row in rows]
        assert "edges" in names and "answers list_concepts" in names
        # A restart reads every structure back: no step builds the documents.
        assert any(name.startswith("documents 1-") for name in names) == (kind != "restart")
        # A restart reads context's index back first, before any document is built.
        assert (names[0] == "context_index") == (kind == "restart")
        for row in rows:
            assert row[1].endswith(" ms") and int(row[2]) >= 0
            shown = row[3].removesuffix(" |")
            assert shown == "-" or len(shown.split(", ")) <= 2


def test_a_stretch_is_the_time_between_two_checks(warm_gaps: ModuleType) -> None:
    token = warm_gaps.stretches_token(CancelToken)()
    token.check()
    token.check()
    token.close()
    assert len(token.stretches) == 3 and all(s >= 0 for s in token.stretches)
    token.cancel()
    with pytest.raises(BundleError) as raised:  # still the token's own check
        token.check()
    assert raised.value.code == "operation_cancelled"
