"""Where a restarted server's warm-up keeps a caller's call waiting (issue 29).

The warm-up stands aside for a caller's call only at a check of its token
(:class:`bundle_mcp.readiness.StepAside`); between two checks a call that comes shares the
interpreter with it, at half speed or worse. This loads BUNDLE over the parse-cache folder
``--cache DIR``, answers one ``read_concept`` (a restarted server's first call), then runs the
warm-up's steps in order (:func:`bundle_mcp.readiness.warm_steps`) with a token that times every
stretch between two of its checks, and prints each step's time, its number of checks and its
longest stretches: what a call that comes during the step may wait for.

On an empty folder the run is a cold start, and it saves the parse cache after the steps as a
serving process does; run it again on the same folder for a restart's warm-up (the one the
figures in ``docs/decisions/restart-calls.md`` are of):

    PYTHONPATH=src .venv/bin/python bench/warm_gaps.py /work/bench10k --cache /tmp/pc  # fills
    PYTHONPATH=src .venv/bin/python bench/warm_gaps.py /work/bench10k --cache /tmp/pc  # restart

Times are a person's reading on a shared machine; no test asserts one.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import os
import sys
import time
from pathlib import Path
from typing import Any

# Stretches shorter than this are not listed (a call waits that long for anything).
SHOWN_FROM_S = 0.005


@dataclasses.dataclass(frozen=True)
class StepGaps:
    """One warm step: how long it ran, how many checks it made, its longest stretches."""

    name: str
    seconds: float
    checks: int
    longest: tuple[float, ...]


def stretches_token(cancel_token: type) -> type:
    """A token class (a subclass of ``cancel_token``) that keeps the time between its checks."""

    class Timed(cancel_token):  # type: ignore[misc, valid-type]
        def __init__(self) -> None:
            super().__init__()
            self.stretches: list[float] = []
            self._last = time.perf_counter()

        def check(self) -> None:
            now = time.perf_counter()
            self.stretches.append(now - self._last)
            self._last = now
            super().check()

        def close(self) -> None:
            """The stretch from the last check to the step's end."""
            self.stretches.append(time.perf_counter() - self._last)

    return Timed


def measure(bundle: str, concept_id: str | None, longest: int) -> tuple[list[StepGaps], bool]:
    """Each warm step's stretches, in order; and whether the load read its documents' rows
    back (a restart) rather than parsing them."""
    from bundle_mcp.cancel import CancelToken
    from bundle_mcp.dispatch import Dispatcher
    from bundle_mcp.limits import DEFAULT_CAPS
    from bundle_mcp.readers import ALL_READER
    from bundle_mcp.readiness import warm_steps
    from bundle_mcp.serve_config import ServeConfig

    dispatcher = Dispatcher(ServeConfig(bundles=(bundle,), caps=DEFAULT_CAPS))
    view = dispatcher.served_snapshot(bundle, CancelToken(), ALL_READER)
    first = concept_id if concept_id is not None else next(iter(view.concepts.paths), None)
    if first is not None:
        dispatcher.call("read_concept", {"concept_id": first})
    restart = view.inbound is not None and view.inbound.kept_rows() > 0
    timed = stretches_token(CancelToken)
    found: list[StepGaps] = []
    # Frozen before each step as a serving process's first warm-up freezes what it built
    # (readiness._freeze_step): else the collector's full passes over it land in the steps.
    gc.freeze()
    for step in warm_steps(dispatcher, bundle, ALL_READER, view):
        token: Any = timed()
        started = time.perf_counter()
        step.build(token)
        seconds = time.perf_counter() - started
        token.close()
        gc.freeze()
        found.append(StepGaps(step.name, seconds, len(token.stretches) - 1,
                              tuple(sorted(token.stretches, reverse=True)[:longest])))
    if not restart:
        token = CancelToken()
        dispatcher.save_parse_cache(bundle, dispatcher.refreshed_snapshot(bundle, token,
                                                                          ALL_READER))
    return found, restart


def table(found: list[StepGaps], restart: bool) -> str:
    lines = [f"warm-up steps of a {'restart' if restart else 'cold start (parse cache saved)'}"
             f" (a call that comes during a stretch may wait for it)", "",
             "| step | time | checks | longest stretches |", "|---|---:|---:|---|"]
    for step in found:
        shown = ", ".join(f"{s * 1000:.1f} ms" for s in step.longest if s >= SHOWN_FROM_S)
        lines.append(f"| {step.name} | {step.seconds * 1000:.1f} ms | {step.checks} | "
                     f"{shown or '-'} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("bundle", type=Path)
    parser.add_argument("--cache", type=Path, required=True,
                        help="the parse-cache folder (empty: a cold start that fills it)")
    parser.add_argument("--concept", help="the first call's concept (default: the first one)")
    parser.add_argument("--longest", type=int, default=3, help="stretches listed per step")
    args = parser.parse_args(argv)
    args.cache.mkdir(parents=True, exist_ok=True)
    os.environ["BUNDLE_MCP_CACHE_DIR"] = str(args.cache.resolve())
    found, restart = measure(str(args.bundle.resolve()), args.concept, args.longest)
    print(table(found, restart))
    return 0


if __name__ == "__main__":
    sys.exit(main())
