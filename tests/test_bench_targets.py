"""``make bench``'s comparison with the previous results: which figures it calls regressions.

Pure functions of bench/targets.py over results dicts; nothing is measured or timed here.
"""

from __future__ import annotations

import copy
import io
import json
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from bench_module import bench_module

BENCH = Path(__file__).resolve().parent.parent / "bench"


@pytest.fixture(scope="module")
def targets() -> Iterator[ModuleType]:
    yield from bench_module("targets")


def result(**changes: Any) -> dict[str, Any]:
    """One size's result as bench/targets.py writes it (the fields figures() reads)."""
    base: dict[str, Any] = {
        "concepts": 1000, "bundle_bytes": 6_000_000, "serve_args": [],
        "cold_initialize_s": 0.12, "cold_first_answer_s": 1.0, "cold_ready_s": 5.0,
        "restart_ready_s": 0.8, "start_s": 0.1, "one_file_parse_s": 0.004,
        "cold_calls": {"read_concept": {"warm_median_s": 0.002, "first_s": 0.01,
                                        "error": False},
                       "list_concepts": {"warm_median_s": 0.100, "first_s": 0.2,
                                         "error": False}},
        "restart_calls": {"read_concept": {"warm_median_s": 0.002, "first_s": 0.004}},
        "edits": {"edited_s": 0.03, "created_s": 0.03, "deleted_s": 0.03},
        "peak_rss_mib": 100.0, "cache_bytes": 10 * 1024 * 1024,
        "throughput": {"calls_per_s": 500.0, "p99_s": 0.05},
    }
    for key, value in changes.items():
        base[key] = value
    return base


def names(found: list[Any]) -> list[str]:
    return [regression.name for regression in found]


def test_an_unchanged_result_has_no_regression(targets: ModuleType) -> None:
    assert targets.regressions(result(), result()) == []


def test_slower_by_more_than_the_tolerance_and_the_floor_is_a_regression(
        targets: ModuleType) -> None:
    now = result()
    now["cold_calls"] = copy.deepcopy(now["cold_calls"])
    now["cold_calls"]["list_concepts"]["warm_median_s"] = 0.130  # +30 %, +30 ms
    found = targets.regressions(result(), now)
    assert names(found) == ["list_concepts: warm median"]
    assert "+30%" in found[0].line() and "previous 100.0 ms" in found[0].line()


@pytest.mark.parametrize("key, value", [
    ("cold_ready_s", 5.9),  # +18 %: within the tolerance
    ("cold_initialize_s", 0.122),  # +2 ms: under the floor, though +1.7 %
    ("start_s", 0.05),  # faster
    ("peak_rss_mib", 112.0),  # +12 MiB: under the floor
])
def test_noise_is_not_a_regression(targets: ModuleType, key: str, value: float) -> None:
    assert targets.regressions(result(), result(**{key: value})) == []


def test_a_millisecond_call_that_doubles_is_under_the_floor(targets: ModuleType) -> None:
    now = result()
    now["cold_calls"] = copy.deepcopy(now["cold_calls"])
    now["cold_calls"]["read_concept"]["warm_median_s"] = 0.004  # 2 → 4 ms
    assert targets.regressions(result(), now) == []
    now["cold_calls"]["read_concept"]["warm_median_s"] = 0.006  # 2 → 6 ms
    assert names(targets.regressions(result(), now)) == ["read_concept: warm median"]


def test_memory_and_throughput_regress_in_their_own_direction(targets: ModuleType) -> None:
    worse = result(peak_rss_mib=130.0, throughput={"calls_per_s": 300.0, "p99_s": 0.05})
    assert sorted(names(targets.regressions(result(), worse))) == sorted([
        "peak RSS, every tool used, every structure built",
        "HTTP read_concept, 32 clients: calls/s"])
    better = result(peak_rss_mib=60.0, throughput={"calls_per_s": 900.0, "p99_s": 0.01})
    assert targets.regressions(result(), better) == []


def test_a_figure_the_previous_result_lacks_is_skipped(targets: ModuleType) -> None:
    """Results written before a figure existed (spawn → initialize, say) compare on the rest."""
    old = result(cold_ready_s=2.0)
    del old["cold_initialize_s"], old["throughput"]
    found = targets.regressions(old, result(cold_initialize_s=9.0))
    assert names(found) == ["ready (every structure built), no cache"]


def test_the_newest_file_that_measured_a_size_is_the_previous(targets: ModuleType,
                                                             tmp_path: Path) -> None:
    def write(name: str, sizes: list[int]) -> Path:
        path = tmp_path / name
        path.write_text(json.dumps({"results": [result(concepts=n) for n in sizes]}))
        return path

    files = [write("2026-12-01-targets.json", [1000, 9978]),
             write("2026-12-02-targets.json", [300]),
             write("2026-12-03-targets.json", [1000])]
    found = targets.previous_results(files, [1000, 9978, 50000])
    assert {size: name for size, (name, _) in found.items()} == {
        1000: "2026-12-03-targets.json", 9978: "2026-12-01-targets.json"}


def test_the_committed_50000_concept_runs_are_previous_results_too(targets: ModuleType) -> None:
    """A 50,000-concept run is committed as ``…-targets-50k.json``: the next such run compares
    with it (the listing once read ``*-targets.json`` only, so no 50,000 figure ever had a
    previous one)."""
    if not (targets.REPO_DIR / ".git").exists():
        pytest.skip("not a git checkout: the committed results cannot be listed")
    if not list((targets.REPO_DIR / "bench" / "results").glob("*-targets-50k.json")):
        pytest.skip("no 50,000-concept run in bench/results")
    found = targets.previous_results(targets.committed_results(), [50000])
    assert found[50000][0].endswith("-targets-50k.json")


def test_the_table_names_the_previous_file_and_each_regression(targets: ModuleType) -> None:
    now = result(cold_first_answer_s=3.0)
    text = targets.render([now], {1000: ("2026-12-03-targets.json", result())})
    assert "| previous |" in text and "Previous: 2026-12-03-targets.json." in text
    assert "Regressions against 2026-12-03-targets.json" in text and "20%" in text
    assert "- **regression**: spawn → first answer (read_concept), no cache: 3.00 s " \
           "(previous 1.00 s, +200%)" in text


def test_a_call_times_its_own_reply_not_a_notification_before_it(targets: ModuleType) -> None:
    # After an edit the server may announce a changed resource list before it answers.
    lines = [{"jsonrpc": "2.0", "method": "notifications/resources/list_changed"},
             {"jsonrpc": "2.0", "id": 1, "result": {"isError": False}}]

    class Process:
        stdin = io.BytesIO()
        stdout = io.BytesIO(b"".join(json.dumps(line).encode() + b"\n" for line in lines))

    session = targets.Session(bundle="b", cache_dir="c", log_dir="l")
    session.process = Process()
    _elapsed, body = session.call("read_concept", {"concept_id": "x"})
    assert json.loads(body)["id"] == 1


def test_a_reply_is_known_by_the_head_the_sdk_writes(targets: ModuleType) -> None:
    head = targets._REPLY_HEAD.match(b'{"jsonrpc":"2.0","id":12,"result":{"content":[]}}\n')
    assert head is not None and int(head.group(1)) == 12
    assert targets._REPLY_HEAD.match(b'{"jsonrpc":"2.0","method":"notifications/x"}\n') is None


@pytest.mark.parametrize("warm, first, met", [
    (0.002, 0.049, True),  # under 50 ms: met however small the warm median
    (0.002, 0.051, False),
    (0.040, 0.079, True),  # under twice the warm median
    (0.040, 0.081, False),
])
def test_a_first_call_after_a_restart_is_judged_by_the_issues_bound(
        targets: ModuleType, warm: float, first: float, met: bool) -> None:
    now = result(restart_calls={"read_concept": {"warm_median_s": warm, "first_s": first}})
    line = next(line for line in targets.render([now], {}).splitlines()
                if "first call after a restart" in line)
    assert ("| met |" in line) is met, line


def test_a_first_call_not_waiting_for_ready_has_its_own_row_and_the_same_bound(
        targets: ModuleType) -> None:
    """The calls a client makes at once after a restart are judged apart from those the
    restart session makes once ready, by the same bound, and a regression among them is named."""
    now = result(restart_at_once={"read_concept": 0.2})
    rows = [line for line in targets.render([now], {}).splitlines() if "not waiting" in line]
    assert len(rows) == 1 and "| **missed** |" in rows[0]
    fast = result(restart_at_once={"read_concept": 0.03})
    assert "| met |" in next(line for line in targets.render([fast], {}).splitlines()
                             if "not waiting" in line)
    assert names(targets.regressions(fast, now)) == [
        f"read_concept: {targets.AT_ONCE}"]


def test_no_question_of_the_new_question_case_is_asked_twice_in_a_run(
        targets: ModuleType, tmp_path: Path) -> None:
    """context keeps a question's stems once asked (in memory, and across restarts), so the
    row of new questions asks each only once: the cold session's first and warm calls, the
    restart session's, and the call at once each take their own."""
    (tmp_path / "a.md").write_text("# A\n")
    all_cases = targets.cases(tmp_path, {"hub": "a", "rare_word_example": "zq"})
    case = next(c for c in all_cases if c.label == targets.NEW_QUESTION)
    warm = 5
    asked = [case.arguments_for(start + k)["question"]
             for start in (targets.COLD_CALLS, targets.RESTART_CALLS) for k in range(1 + warm)]
    asked += [case.arguments_for(targets.AT_ONCE_CALLS + run)["question"]
              for run in range(targets.AT_ONCE_RUNS)]
    assert len(set(asked)) == len(asked) == 12 + targets.AT_ONCE_RUNS
    assert dict(targets.CASE_TARGETS)[targets.NEW_QUESTION] == 0.100
    repeated = next(c for c in all_cases if c.label == "context")
    assert repeated.arguments_for(7) == repeated.arguments
    searches = next(c for c in all_cases if c.label == targets.NEW_SEARCH)
    asked = [searches.arguments_for(start + k)["query"]
             for start in (targets.COLD_CALLS, targets.RESTART_CALLS) for k in range(1 + warm)]
    asked += [searches.arguments_for(targets.AT_ONCE_CALLS + run)["query"]
              for run in range(targets.AT_ONCE_RUNS)]
    assert len(set(asked)) == len(asked) and "question" not in searches.arguments_for(3)


def test_the_served_package_is_compiled_even_where_imports_write_no_bytecode(
        targets: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A spawn timed against a package whose bytecode is missing would time a compile too.
    package = tmp_path / "served_pkg_for_bench"
    (package / "tools").mkdir(parents=True)
    (package / "__init__.py").write_text("", encoding="utf-8")
    (package / "tools" / "walk.py").write_text("STEP = 1\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr("sys.dont_write_bytecode", True)
    assert targets.compile_package("served_pkg_for_bench") == package
    assert list((package / "__pycache__").glob("__init__.*.pyc"))
    assert list((package / "tools" / "__pycache__").glob("walk.*.pyc"))


def test_a_package_that_does_not_compile_stops_the_run(
        targets: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "broken_pkg_for_bench"
    package.mkdir()
    (package / "__init__.py").write_text("def (:\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(RuntimeError, match="did not compile"):
        targets.compile_package("broken_pkg_for_bench")


def test_a_cold_get_neighbors_has_its_row_when_measured(targets: ModuleType) -> None:
    """The first get_neighbors on an empty parse cache is judged by the read_concept row's
    bound (the Go reference's time for any call); a result from before it has no such row."""
    text = targets.render([result(cold_neighbors_s=0.9)])
    row = next(line for line in text.splitlines() if line.startswith(f"| {targets.COLD_NEIGHBORS}"))
    assert "| 900.0 ms | ≤ 2.1 s | met |" in row
    assert "| **missed** |" in next(
        line for line in targets.render([result(cold_neighbors_s=2.5)]).splitlines()
        if line.startswith(f"| {targets.COLD_NEIGHBORS}"))
    assert targets.COLD_NEIGHBORS not in targets.render([result()])
    both = targets.render([result(cold_neighbors_s=2.5, cold_neighbors_middle_s=0.6)])
    row = next(line for line in both.splitlines()
               if line.startswith(f"| {targets.COLD_NEIGHBORS_MIDDLE}"))
    assert "| 600.0 ms | ≤ 2.1 s | met |" in row
    assert targets.COLD_NEIGHBORS_MIDDLE not in targets.render([result(cold_neighbors_s=0.9)])
