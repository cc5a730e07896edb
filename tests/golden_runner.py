"""Run the golden cases in tests/golden/<tool>/<case>.json; ``--update`` rewrites expectations.

A case is ``{"description", "bundle", "arguments", "expected": {"is_error", "structured"}}``
(plus an optional ``"setup"``, and an optional ``"reader": {"read": [...], "write": [...]}``:
the call is made with those folder scopes). ``bundle`` is the name of a folder under
testdata/bundles/,
``examples/<name>`` for a shipped example bundle, or ``{"generate": <generator>, ...}``: large
bundles (1000 concepts, a 1000-link hub, a 160-node mesh, a concept with 101 sources, a
1000-concept inventory) are written into a temporary folder at run time instead of being
committed.
Every case runs on a private temporary copy of its bundle, so a write tool's case never changes
testdata. ``"setup": "symlink_secret"`` adds ``secret.md`` to that copy, a symlink to a file
outside the bundle: symlinks are not committed (git and some checkouts do not keep them
faithfully), so the case builds its own. ``"reader": {"read": [...], "write": [...]}`` makes the
call as a reader with those folder scopes (``write`` omitted: none), for the scope refusals of
the write tools; the TypeScript client test serves one reader for every call and leaves these
cases out.

Each case goes through the real dispatch path: ``Dispatcher(ServeConfig(bundles=(root,)))
.call(tool, arguments)``; the outcome compared is ``{"is_error", "structured"}``.

Usage: ``python -m tests.golden_runner [--update] [CASE_GLOB]`` from the repository root (``make
update-goldens`` runs the update and refuses when CI is set). Without ``--update`` it only reports
the cases whose outcome differs.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
GOLDEN_DIR = REPO / "tests" / "golden"
BUNDLES_DIR = REPO / "testdata" / "bundles"
EXAMPLES_PREFIX = "examples/"


def golden_paths() -> list[Path]:
    return sorted(GOLDEN_DIR.glob("*/*.json"))


def case_id(path: Path) -> str:
    return f"{path.parent.name}/{path.stem}"


def load_case(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def dump_case(case: dict[str, Any]) -> str:
    """Stable, reviewable JSON: two-space indent, raw UTF-8, key order as written."""
    return json.dumps(case, indent=2, ensure_ascii=False) + "\n"


# -- generated bundles -----------------------------------------------------------------------


def _write(root: Path, files: dict[str, str]) -> None:
    for relative, text in files.items():
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")


def generate_nodes(root: Path, count: int = 1000) -> None:
    """``node-0000`` … one small concept per number, all titled ``Node <n>``."""
    _write(
        root,
        {
            f"node-{n:04d}.md": f"---\ntype: Note\ntitle: Node {n:04d}\n---\nGenerated node.\n"
            for n in range(count)
        },
    )


def generate_hub(root: Path, count: int = 1000) -> None:
    """``hub`` plus ``node-0000`` … each linking to the hub once."""
    files = {"hub.md": "---\ntype: Note\ntitle: Hub\n---\nEverything links here.\n"}
    for n in range(count):
        files[f"node-{n:04d}.md"] = (
            f"---\ntype: Note\ntitle: Node {n:04d}\n---\nSee the [hub](hub.md).\n"
        )
    _write(root, files)


def generate_mesh(root: Path, count: int = 160) -> None:
    """``node-000`` … each linking to every other node, plus ``island``, which nothing links to:
    a dense graph where a walk that looks for the island runs into its edge budget."""
    files = {"island.md": "---\ntype: Note\ntitle: Island\n---\nNothing links here.\n"}
    for n in range(count):
        links = "".join(f"[{m:03d}](node-{m:03d}.md)\n" for m in range(count) if m != n)
        files[f"node-{n:03d}.md"] = f"---\ntype: Note\ntitle: Node {n:03d}\n---\n{links}"
    _write(root, files)


def generate_many_sources(root: Path, count: int = 101) -> None:
    """``cited``: one concept with ``count`` provenance sources."""
    entries = "".join(
        f"  - id: s{n:03d}\n    resource: https://example.com/{n:03d}\n" for n in range(count)
    )
    _write(root, {"cited.md": f"---\ntype: Note\ntitle: Cited\nsources:\n{entries}---\nBody.\n"})


def generate_inventory(root: Path, count: int = 1000) -> None:
    """``count`` concepts with more of everything than a summary list holds.

    Concept ``n`` sits in ``area-<n % 12>/`` (every third one a level deeper, in ``deep/``) and
    has type ``Kind <n % 60>`` (``n % 7 == 0`` adds weight to ``Kind 0``), tags ``t<n % 80>`` and
    ``t<n % 3>``, a status cycling through none / draft / stable / deprecated / ``bogus``, a
    ``verified`` entry by a human on every fifth and by a machine on every seventh, a
    ``stale_after`` in 2026 on every fourth, a typed relation of type ``rel_<n % 55>`` to
    concept ``n + 1``, a link to one of ten hubs (concepts 0-9, hub ``n % 10`` gets
    ``count / 10`` links) and, on every ninth, a broken link. Even areas have an ``index.md``
    listing the concepts of every other dozen (``(n // 12) % 2 == 0``; the others are orphans);
    odd areas and the ``deep/`` folders have none, so their concepts go unchecked.
    """
    def place(n: int) -> str:
        area = f"area-{n % 12:02d}"
        return f"{area}/deep/c{n:04d}" if n % 3 == 0 else f"{area}/c{n:04d}"

    statuses = ("", "status: draft\n", "status: stable\n", "status: deprecated\n",
                "status: bogus\n")
    files: dict[str, str] = {}
    listed: dict[str, list[str]] = {}
    for n in range(count):
        kind = 0 if n % 7 == 0 else n % 60
        verified = ""
        if n % 5 == 0:
            verified = "verified:\n  - by: human:ann\n    at: 2026-01-02T03:04:05Z\n"
        elif n % 7 == 0:
            verified = "verified:\n  - by: bot:checker\n    at: 2026-01-02T03:04:05Z\n"
        stale = f"stale_after: 2026-{n % 12 + 1:02d}-15\n" if n % 4 == 0 else ""
        relation = (f"relations:\n  rel_{n % 55}:\n    - target: {place((n + 1) % count)}\n"
                    if n % 2 == 0 else "")
        hub = place(n % 10)
        broken = f" See also [gone](/missing/m{n:04d}.md)." if n % 9 == 0 else ""
        files[place(n) + ".md"] = (
            f"---\ntype: Kind {kind}\ntitle: Concept {n:04d}\ntags: [t{n % 80}, t{n % 3}]\n"
            f"{statuses[n % 5]}{verified}{stale}{relation}---\n"
            f"# Concept {n:04d}\n\nLinks to [the hub](/{hub}.md).{broken}\n"
        )
        area, rest = place(n).split("/", 1)
        if n % 2 == 0:  # an even area (12 is even)
            entries = listed.setdefault(area, [])
            if (n // 12) % 2 == 0:
                entries.append(rest)
    for area, entries in listed.items():
        lines = "".join(f"* [{e}]({e}.md)\n" for e in sorted(entries))
        files[f"{area}/index.md"] = f"# {area}\n\n## Concepts\n\n{lines}"
    _write(root, files)


GENERATORS: dict[str, Callable[..., None]] = {
    "nodes": generate_nodes,
    "hub": generate_hub,
    "mesh": generate_mesh,
    "many_sources": generate_many_sources,
    "inventory": generate_inventory,
}


# -- setups ----------------------------------------------------------------------------------


def setup_symlink_secret(root: Path, workdir: Path) -> None:
    """``secret.md`` → a concept file outside the bundle; the loader must never follow it."""
    outside = workdir / "outside"
    outside.mkdir(exist_ok=True)
    target = outside / "secret.md"
    target.write_text("---\ntype: Secret\ntitle: Secret\n---\nsecret contents\n", "utf-8")
    os.symlink(target, root / "secret.md")


# A fixed author, committer and clock: the commit hashes of the history setup are the same on
# every machine, so the goldens can name them.
def _git(root: Path, *args: str, when: str, author: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update({
        "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": author, "GIT_AUTHOR_EMAIL": f"{author.lower()}@example.com",
        "GIT_COMMITTER_NAME": author, "GIT_COMMITTER_EMAIL": f"{author.lower()}@example.com",
        "GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when,
    })
    subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True,
                   timeout=60)


def setup_git_history(root: Path, workdir: Path) -> None:
    """The bundle as the last of three commits: ``notes/roast.md`` began as
    ``drafts/roast.md`` (commit 1, with the rest), was moved into ``notes/`` (commit 2) and then
    edited (commit 3). The work tree then adds one uncommitted line to it."""
    roast = root / "notes" / "roast.md"
    final = roast.read_text(encoding="utf-8")
    roast.unlink()
    drafts = root / "drafts"
    drafts.mkdir()
    (drafts / "roast.md").write_text(final.replace("Rest the beans two days.\n", ""), "utf-8")
    _git(root, "init", "-q", "-b", "main", when="2026-01-05T09:00:00+00:00", author="Ann")
    _git(root, "add", "-A", when="2026-01-05T09:00:00+00:00", author="Ann")
    _git(root, "commit", "-q", "-m", "Draft the roast guide",
         when="2026-01-05T09:00:00+00:00", author="Ann")
    _git(root, "mv", "drafts/roast.md", "notes/roast.md", when="2026-02-01T10:00:00+00:00",
         author="Bo")
    _git(root, "commit", "-q", "-m", "Publish the roast guide",
         when="2026-02-01T10:00:00+00:00", author="Bo")
    roast.write_text(final, "utf-8")
    _git(root, "commit", "-q", "-am", "Say how long the beans rest",
         when="2026-03-01T11:30:00+01:00", author="Ann")
    roast.write_text(final + "Weigh every batch.\n", "utf-8")


SETUPS: dict[str, Callable[[Path, Path], None]] = {
    "symlink_secret": setup_symlink_secret,
    "git_history": setup_git_history,
}


def prepare_bundle(case: dict[str, Any], workdir: Path) -> str:
    """The absolute, symlink-free root of the case's bundle (built under ``workdir`` if needed)."""
    workdir = Path(os.path.realpath(workdir))
    spec = case["bundle"]
    setup = case.get("setup")
    if isinstance(spec, dict):
        options = {k: v for k, v in spec.items() if k != "generate"}
        root = workdir / "generated"
        root.mkdir()
        GENERATORS[spec["generate"]](root, **options)
    else:
        # "examples/<name>" is a shipped example bundle, anything else a folder of testdata.
        source = REPO / spec if spec.startswith(EXAMPLES_PREFIX) else BUNDLES_DIR / spec
        if not source.is_dir():
            raise FileNotFoundError(f"golden bundle {source.relative_to(REPO)} does not exist")
        # Always a private copy: a write tool's case must never change testdata, and the
        # snapshot revision does not depend on where the bundle sits.
        root = workdir / "bundle"
        shutil.copytree(source, root, symlinks=True)
    if setup is not None:
        SETUPS[setup](root, workdir)
    return str(root)


def case_reader(case: dict[str, Any]) -> Any:
    """The reader a case calls as: ``"reader": {"read": [...], "write": [...]}`` (folder
    patterns, docs/READERS.md), else the all-reading reader."""
    from bundle_mcp.okf.scopes import NOTHING, Access, FolderScope
    from bundle_mcp.readers import ALL_READER, Reader

    spec = case.get("reader")
    if spec is None:
        return ALL_READER
    write = spec.get("write")
    return Reader("golden", Access(FolderScope.of(spec.get("read", ["**"])),
                                   FolderScope.of(write) if write else NOTHING))


def run_case(case: dict[str, Any], workdir: Path) -> dict[str, Any]:
    """The outcome of one case as ``{"is_error", "structured"}``, through the dispatch core."""
    from bundle_mcp.dispatch import Dispatcher, ServeConfig

    root = prepare_bundle(case, workdir)
    outcome = Dispatcher(ServeConfig(bundles=(root,))).call(
        case["tool"], case["arguments"], None, case_reader(case))
    # A JSON round trip: what is compared is exactly what a golden file can hold.
    return json.loads(json.dumps({"is_error": outcome.is_error, "structured": outcome.structured}))


def run_golden(path: Path) -> dict[str, Any]:
    case = load_case(path)
    with tempfile.TemporaryDirectory(prefix="golden-") as tmp:
        return run_case({**case, "tool": path.parent.name}, Path(tmp))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.golden_runner", description=__doc__)
    parser.add_argument("--update", action="store_true", help="rewrite the expected outcomes")
    parser.add_argument("pattern", nargs="?", default="*", help="case glob, e.g. 'get_neighbors/*'")
    args = parser.parse_args(argv)
    if args.update and os.environ.get("CI"):
        print("refusing to update goldens when CI is set", file=sys.stderr)
        return 2
    failures = 0
    for path in golden_paths():
        if not fnmatch.fnmatch(case_id(path), args.pattern):
            continue
        case = load_case(path)
        got = run_golden(path)
        if args.update:
            if case.get("expected") != got:
                case["expected"] = got
                path.write_text(dump_case(case), encoding="utf-8")
                print(f"updated {case_id(path)}")
        elif case.get("expected") != got:
            failures += 1
            print(f"DIFFERS {case_id(path)}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
