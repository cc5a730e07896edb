"""A stateful model test of every write tool, through the real dispatcher, with crashes.

A hypothesis ``RuleBasedStateMachine`` works on a small bundle built from the fixtures in
``testdata/bundles/`` (the v0.1 ``writes-legacy`` bundle plus the date-valued ``orders.md`` of
``writes-temporal``, so the v0.2 migration and then the temporal upgrade both have work to do).
Its rules preview and apply concept patches (every operation kind of the contract, valid and
invalid, on existing, missing and malformed concept IDs), bundle edits (renames across folders,
onto existing IDs, deletions refused or unlinking, log entries, regenerated indexes), v0.2
migrations and temporal upgrades,
apply stored previews whose revision and digest are fresh, stale or forged, write whole concepts
with valid and invalid content, and interrupt an apply at a random publication step.

After every step an invariant checks, through the dispatcher and on disk:

(a) the bundle loads: ``list_concepts`` and ``validate_bundle`` answer, the bundle stays
    conformant, and the concepts listed are exactly the concept files on disk;
(b) every file is wholly old or wholly new, and all files of one apply agree;
(c) the served revision (``search_sections``' ``snapshot_revision``) is the revision of the files
    on disk, computed here independently: the base or the result of an interrupted apply;
(d) no file or folder outside the state folder ``.bundle-mcp/`` that the model does not expect
    (staged dot-files, folders left by a rolled-back apply);
(e) no call ever answers ``internal_error``.

The model is the bytes of every file. A successful apply's new state is the old state plus the
writes the tool handed to ``apply_writes`` (the harness wraps it and records them; a deletion
is recorded as ``None``), checked
against what the answer says it changed and the revision it reports; after an interrupted apply
the files must equal either the state before or that state plus the writes, nothing else.

Interruption ("SIGKILL-style"): the harness passes ``apply_writes`` a ``step_hook`` that raises a
private ``BaseException`` at the chosen step, so nothing after that point of the apply runs. A real
SIGKILL differs: no ``finally`` block, ``except BaseException`` handler or ``__exit__`` runs
either, whereas the exception unwinds through them (descriptors are closed, the flock is
released, ``Tree`` closes its folders). The kernel does the same for a killed process (it closes
every descriptor and so drops the flock), so as long as those blocks only close descriptors (they
do as this is written) the in-process interruption leaves the same files on disk. Cleanup that
only runs in-process (a ``finally`` that deletes staged files, say) would hide a bug from the
state machine; the real-SIGKILL cases at the end of the file (a subprocess kills itself at a
named step) cover exactly that difference. After an interruption the machine either keeps its
dispatcher (a server whose call died, e.g. a thread killed by an unexpected exception) or starts
a new one (the server process restarted).

Settings: ``test_writes_stateful`` runs a bounded number of examples (40 x 15 steps;
``STATEFUL_FAST_EXAMPLES`` overrides) so the file stays well under a minute;
``test_writes_stateful_long`` (marked ``slow``) runs 60 x 40 steps, 10 under
``HYPOTHESIS_PROFILE=ci`` (the repository's convention: slow tests run in CI, bounded);
``STATEFUL_EXAMPLES`` overrides its count for a deep run. ``STATEFUL_STATS=1`` (with ``-s``)
prints what the calls answered, to see what the rules reach.
"""

from __future__ import annotations

import base64
import collections
import contextlib
import hashlib
import inspect
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from bundle_mcp.contracts import ContractSet
from bundle_mcp.dispatch import Dispatcher, Outcome, ServeConfig
from bundle_mcp.tools import load_tools
from bundle_mcp.writes import publish as publish_module

REPO = Path(__file__).resolve().parent.parent
TESTDATA = REPO / "testdata" / "bundles"
STATE_DIR = ".bundle-mcp"

TOOL_NAMES = (
    "apply_bundle_edit",
    "apply_concept_patch",
    "apply_temporal_upgrade",
    "apply_v02_migration",
    "list_concepts",
    "preview_bundle_edit",
    "preview_concept_patch",
    "preview_temporal_upgrade",
    "preview_v02_migration",
    "read_concept",
    "search_sections",
    "validate_bundle",
    "write_concept",
)
CONTRACTS = ContractSet()  # compiling contracts is the slow part of a dispatcher: share one
TOOLS = load_tools(TOOL_NAMES)  # imports every tool module before the harness patches them

_PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "dev")


def build_bundle(root: Path) -> None:
    """The starting bundle: v0.1 (undeclared), a legacy concept, a date-valued one, a plain one."""
    root.mkdir()
    for name in ("cache.md", "note.md"):
        shutil.copyfile(TESTDATA / "writes-legacy" / name, root / name)
    shutil.copyfile(TESTDATA / "writes-temporal" / "orders.md", root / "orders.md")
    with (root / "note.md").open("ab") as note:  # a link for renames and deletions to keep
        note.write(b"\nSee [the cache](cache.md#cache) and [orders](/orders).\n")
    (root / "index.md").write_bytes(
        b"# Knowledge\n\n- [Cache](cache.md)\n- [Note](note.md)\n- [Orders](orders.md)\n"
    )


# ============================================================================ the harness


class SimulatedDeath(BaseException):
    """The process "dies" at a publication step: nothing after it runs (see the module doc).

    A BaseException so that no ``except Exception`` in the server turns it into an answer.
    """


@dataclass
class ApplyCall:
    """One call of ``apply_writes`` as the harness saw it."""

    writes: dict[str, bytes | None]  # path -> the new bytes it was asked to publish (None: delete)
    steps: list[str] = field(default_factory=list)
    receipt: Any = None  # the Receipt it returned (None when it raised)


@dataclass
class Harness:
    crash_at: int | None = None  # die at the n-th step of this tool call (1-based)
    steps_seen: int = 0
    calls: list[ApplyCall] = field(default_factory=list)

    def arm(self, crash_at: int | None) -> None:
        self.crash_at = crash_at
        self.steps_seen = 0
        self.calls = []


HARNESS = Harness()
STATS: collections.Counter[str] = collections.Counter()  # what the rules reached (see _report)
_ORIGINAL_APPLY = publish_module.apply_writes
_SIGNATURE = inspect.signature(_ORIGINAL_APPLY)
assert "step_hook" in _SIGNATURE.parameters, "apply_writes no longer takes step_hook"


def _apply_writes_under_harness(*args: Any, **kwargs: Any) -> Any:
    bound = _SIGNATURE.bind(*args, **kwargs)
    writes = tuple(bound.arguments["writes"])
    bound.arguments["writes"] = writes
    call = ApplyCall({w.path: None if w.new_bytes is None else bytes(w.new_bytes)
                      for w in writes})
    HARNESS.calls.append(call)
    inner = bound.arguments.get("step_hook")

    def hook(step: str) -> None:
        call.steps.append(step)
        if inner is not None:
            inner(step)
        HARNESS.steps_seen += 1
        if HARNESS.crash_at is not None and HARNESS.steps_seen == HARNESS.crash_at:
            raise SimulatedDeath(step)

    bound.arguments["step_hook"] = hook
    call.receipt = _ORIGINAL_APPLY(*bound.args, **bound.kwargs)
    return call.receipt


@contextlib.contextmanager
def harnessed_apply_writes() -> Iterator[None]:
    """Replace ``apply_writes`` wherever a bundle_mcp module imported it (writes.apply)."""
    sites = [
        module
        for name, module in list(sys.modules.items())
        if name.startswith("bundle_mcp")
        and module is not publish_module
        and getattr(module, "apply_writes", None) is _ORIGINAL_APPLY
    ]
    assert sites, "no module imports apply_writes: the harness cannot reach the write path"
    for module in sites:
        module.apply_writes = _apply_writes_under_harness  # type: ignore[attr-defined]
    try:
        yield
    finally:
        for module in sites:
            module.apply_writes = _ORIGINAL_APPLY  # type: ignore[attr-defined]
        HARNESS.arm(None)


# ============================================================================ the model


def read_tree(root: Path) -> tuple[dict[str, bytes], set[str]]:
    """Every file (bytes) and folder under ``root``, bundle-relative, except ``.bundle-mcp/``."""
    files: dict[str, bytes] = {}
    dirs: set[str] = set()
    for current, subdirs, names in os.walk(root):
        rel = os.path.relpath(current, root)
        rel = "" if rel == "." else rel.replace(os.sep, "/")
        if rel == "":
            subdirs[:] = [d for d in subdirs if d != STATE_DIR]
        for d in subdirs:
            dirs.add(f"{rel}/{d}" if rel else d)
        for name in names:
            path = f"{rel}/{name}" if rel else name
            files[path] = (Path(current) / name).read_bytes()
    return files, dirs


def parents(paths: Any) -> set[str]:
    out: set[str] = set()
    for path in paths:
        parts = path.split("/")[:-1]
        out.update("/".join(parts[: i + 1]) for i in range(len(parts)))
    return out


def revision(files: Mapping[str, bytes]) -> str:
    """The bundle revision, computed independently of the server (docs/DESIGN.md §2): SHA-256 over
    the canonical JSON of the sorted records {path, sha256, size} of the Markdown files."""
    records = [
        {"path": p, "sha256": hashlib.sha256(b).hexdigest(), "size": len(b)}
        for p, b in sorted(files.items())
        if p.endswith(".md") and not any(s.startswith(".") for s in p.split("/"))
    ]
    text = json.dumps(records, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def concept_ids(files: Mapping[str, bytes]) -> list[str]:
    return sorted(
        p[:-3] for p in files if p.endswith(".md") and p.rsplit("/", 1)[-1] not in
        ("index.md", "log.md")
    )


def describe(disk: Mapping[str, bytes], candidates: list[tuple[str, Mapping[str, bytes]]]) -> str:
    """Per file: which candidate state it matches (for an assertion message)."""
    lines = []
    for path in sorted(set(disk).union(*(c for _, c in candidates))):
        have = disk.get(path)
        names = [n for n, c in candidates if c.get(path) == have] or ["NEITHER"]
        shown = "absent" if have is None else f"{len(have)} bytes"
        lines.append(f"  {path}: {shown}, matches {'/'.join(names)}")
    return "\n".join(lines)


def merged(before: Mapping[str, bytes], writes: Mapping[str, bytes | None]) -> dict[str, bytes]:
    """The files after ``writes`` (a ``None`` deletes its file)."""
    after = dict(before)
    for path, data in writes.items():
        if data is None:
            after.pop(path, None)
        else:
            after[path] = data
    return after


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


# ============================================================================ strategies

EXISTING = ("cache", "note", "orders")
MISSING = ("missing", "nested/missing")
NEW_IDS = (
    "fresh",
    "guides/brew",
    "deep/er/still",
    "café ü#1",
    "b" * 252,  # a 255-byte file name: the longest the file system takes
    "f" * 255 + "/leaf",  # a 255-byte folder name
    "fresh.md/x",  # a folder named like the file of "fresh"; writing both must fail cleanly
)
BAD_IDS = (
    "../escape",
    "index",
    "a//b",
    "x.md",
    ".hidden",
    "bad:colon",
    " lead",
    "newdir/" + "b" * 253,  # a 256-byte file name: longer than NAME_MAX
    "g" * 256 + "/leaf",  # a 256-byte folder name
)
PATCH_IDS = st.sampled_from(EXISTING + EXISTING + MISSING + ("guides/brew", "../escape", "index"))

DATES = ("2026-01-10", "2026-06-01", "2025-12-31", "2024-02-29")
BAD_DATES = ("2026-02-30", "2025-02-29")
INSTANTS = ("2026-02-01T10:00:00Z", "2026-02-02T09:30:00+01:00", "2026-03-04T05:06:07.5-05:00")
BAD_INSTANTS = ("2026-01-01T00:00:00", "2026-01-01T00:00:00-00:00")
INSTANT_PROFILE = "instant-0b87c52"

BY = st.sampled_from(["human:ann", "agent/1.0", "x" * 256])
RESOURCES = st.sampled_from(["https://example.com/erd", "https://wiki/x", "urn:thing", "x"])
SOURCE_IDS = st.sampled_from(["erd", "wiki", "new-src", "nope", "cache-design"])


def temporal_values(profile: str | None) -> st.SearchStrategy[str]:
    """Mostly values of the request's profile, sometimes the other kind or an impossible one."""
    good = INSTANTS if profile == INSTANT_PROFILE else DATES
    other = DATES if profile == INSTANT_PROFILE else INSTANTS
    return st.one_of(
        st.sampled_from(good), st.sampled_from(good), st.sampled_from(good),
        st.sampled_from(other + BAD_DATES + BAD_INSTANTS),
    )


def computations() -> st.SearchStrategy[dict[str, Any]]:
    base = {
        "runtime": "python3.12",
        "parameters": [{"name": "day", "type": "date", "required": True}],
        "executor": {"resource": "urn:runner", "receipt": ["sha256:abc"]},
        "attester": {"resource": "urn:attester"},
    }
    return st.sampled_from([
        {**base, "mode": "inline", "inline_computation": "print('hi')", "inline_language": "py"},
        {**base, "mode": "inline", "inline_computation": ""},
        {**base, "mode": "file", "computation_path": "calc/orders.py"},
        {**base, "mode": "file"},  # no computation_path: invalid
    ])


INVALID_OPERATIONS = (
    {"kind": "set_generated", "concept_id": "orders"},
    {"kind": "set_generated", "concept_id": "orders", "generated": {"by": "x"}, "version": "0.2"},
    {"kind": "set_bundle_version", "version": "0.2", "concept_id": "orders"},
    {"kind": "set_lifecycle", "concept_id": "orders",
     "lifecycle": {"status": "archived", "stale_after": None}},
    {"kind": "set_usage_window", "concept_id": "orders",
     "usage_window": {"from": "2026-03-01", "to": "2026-01-01"}},
    {"kind": "remove_source", "concept_id": "orders", "source_id": "a",
     "source": {"resource": "x"}},
    {"kind": "put_source", "concept_id": "orders", "source": {"resource": "x", "usage_count": 12}},
    {"kind": "ensure_verification", "concept_id": "orders",
     "verification": {"by": "h", "at": "2026-01-01T00:00:00"}},
    {"kind": "no_such_kind", "concept_id": "orders"},
)


def operations(profile: str | None) -> st.SearchStrategy[dict[str, Any]]:
    """One operation of each kind in the contract (valid or not), or a malformed one."""
    t = temporal_values(profile)
    cid = PATCH_IDS
    instant = st.sampled_from(INSTANTS + INSTANTS + BAD_INSTANTS)
    window = st.fixed_dictionaries({"from": t, "to": t})
    return st.one_of(
        st.fixed_dictionaries({
            "kind": st.just("set_generated"), "concept_id": cid,
            "generated": st.fixed_dictionaries({"by": BY}, optional={"at": instant}),
        }),
        st.fixed_dictionaries({
            "kind": st.sampled_from(["ensure_verification", "remove_verification"]),
            "concept_id": cid,
            "verification": st.fixed_dictionaries({"by": BY, "at": instant}),
        }),
        st.fixed_dictionaries({
            "kind": st.just("put_source"), "concept_id": cid,
            "source": st.fixed_dictionaries(
                {"resource": RESOURCES},
                optional={"id": SOURCE_IDS, "title": st.just("A title"), "last_modified": t,
                          "usage_count": st.sampled_from(["0", "12"])},
            ),
        }),
        st.fixed_dictionaries({
            "kind": st.just("remove_source"), "concept_id": cid,
            "source_id": SOURCE_IDS,
        }),
        st.fixed_dictionaries({
            "kind": st.just("remove_source"), "concept_id": cid,
            "source": st.fixed_dictionaries({"resource": RESOURCES}),
        }),
        st.fixed_dictionaries(
            {"kind": st.just("set_usage_window"), "concept_id": cid,
             "usage_window": st.one_of(st.none(), window)},
            optional={"source_id": SOURCE_IDS},
        ),
        st.fixed_dictionaries({
            "kind": st.just("set_lifecycle"), "concept_id": cid,
            "lifecycle": st.fixed_dictionaries({
                "status": st.sampled_from([None, "draft", "stable", "deprecated"]),
                "stale_after": st.one_of(st.none(), t),
            }),
        }),
        st.fixed_dictionaries({
            "kind": st.just("put_attested_computation"), "concept_id": cid,
            "attested_computation": computations(),
        }),
        st.fixed_dictionaries({
            "kind": st.just("set_bundle_version"), "version": st.sampled_from(["0.1", "0.2"]),
        }),
        st.sampled_from(INVALID_OPERATIONS),
    )


@st.composite
def patch_requests(draw: Any) -> dict[str, Any]:
    profile = draw(st.sampled_from([None, None, None, INSTANT_PROFILE]))
    args: dict[str, Any] = {
        "actor": draw(st.sampled_from(["human:ann", "agent/1.0"])),
        "operations": draw(st.lists(operations(profile), min_size=1, max_size=3)),
    }
    if profile is not None:
        args["temporal_profile"] = profile
    return args


def valid_operations() -> st.SearchStrategy[dict[str, Any]]:
    """Operations that plan cleanly on the starting concepts (date profile). No
    set_bundle_version: declaring v0.2 by hand would leave few runs that migrate."""
    cid = st.sampled_from(EXISTING)
    return st.one_of(
        st.fixed_dictionaries({
            "kind": st.just("set_lifecycle"), "concept_id": cid,
            "lifecycle": st.fixed_dictionaries({
                "status": st.sampled_from(["draft", "stable", "deprecated"]),
                "stale_after": st.one_of(st.none(), st.sampled_from(DATES)),
            }),
        }),
        st.fixed_dictionaries({
            "kind": st.just("set_generated"), "concept_id": cid,
            "generated": st.fixed_dictionaries({"by": st.sampled_from(["agent/1.0", "human:b"])}),
        }),
        st.fixed_dictionaries({
            "kind": st.just("ensure_verification"), "concept_id": cid,
            "verification": st.fixed_dictionaries({"by": st.just("human:ann"),
                                                   "at": st.sampled_from(INSTANTS)}),
        }),
    )


VALID_PATCHES = st.fixed_dictionaries({
    "actor": st.just("human:ann"),
    "operations": st.lists(valid_operations(), min_size=1, max_size=3),
})
VALID_MAPPINGS = [{"path": "cache.md", "entries": [
    {"legacy_number": 1, "source_id": "cache-design"},
    {"legacy_number": 2, "source_id": "runbook", "resource": "https://wiki/runbook"},
]}]

CITATION_MAPPINGS = st.sampled_from([
    [],
    VALID_MAPPINGS,
    VALID_MAPPINGS,
    VALID_MAPPINGS,
    [{"path": "cache.md", "entries": [
        {"legacy_number": 1, "source_id": "cache-design"},
        {"legacy_number": 2, "source_id": "runbook", "resource": "https://wiki/runbook",
         "title": "Internal runbook"},
    ]}],
    [{"path": "cache.md", "entries": [{"legacy_number": 1, "source_id": "cache-design"}]}],
    [{"path": "cache.md", "entries": [{"legacy_number": 3, "source_id": "nope"}]}],
    [{"path": "missing.md", "entries": [{"legacy_number": 1, "source_id": "x"}]}],
    [{"path": "../cache.md", "entries": [{"legacy_entry": "x", "source_id": "x"}]}],
])


@st.composite
def migration_requests(draw: Any) -> dict[str, Any]:
    args: dict[str, Any] = {
        "timestamp_policy": draw(st.sampled_from(["preserve", "remove_after_copy"])),
        "citation_mappings": draw(CITATION_MAPPINGS),
    }
    if draw(st.integers(0, 3)):
        args["generated_by"] = draw(st.sampled_from(["human:migrator", "agent/2"]))
    if draw(st.integers(0, 3)) == 0:
        args["timestamp_conflict_policy"] = draw(
            st.sampled_from(["reject", "use_generated", "use_timestamp"]))
    if draw(st.integers(0, 4)) == 0:
        args["from"] = draw(st.sampled_from(["auto", "0.1", "0.2"]))
    if draw(st.integers(0, 5)) == 0:
        args["generated_at"] = [{"concept_id": draw(st.sampled_from(EXISTING + MISSING)),
                                 "at": draw(st.sampled_from(INSTANTS))}]
    return args


# How a temporal preview's mappings are made from the bundle's unresolved dates.
TEMPORAL_MODES = st.sampled_from(["none", "all", "all", "partial", "wrong_from", "bad_path",
                                  "duplicate", "no_offset"])

VALID_FRONTMATTERS = (
    "type: note\ntitle: Fresh\n",
    "type: design\nstale_after: 2026-03-01\nusage_window: {from: 2026-01-01, to: 2026-02-01}\n",
    "type: table\nsources:\n  - id: s1\n    resource: https://x\n    last_modified: 2026-01-02\n",
    "type: t\ngenerated:\n  by: a\n  at: 2026-01-01T00:00:00Z\n",
    "type: note",
    "type: note\r\ntitle: CRLF\r\n",
    "type: design  # a v0.1 concept\ntimestamp: 2024-05-01T10:00:00Z\n",
)
INVALID_FRONTMATTERS = (
    "",
    "title: no type\n",
    "type: ''\n",
    "- a list\n",
    "type: [unclosed\n",
    "type: t\n---\nx: y\n",  # a fence inside the frontmatter
    "a: &x [*x]\ntype: t\n",  # a recursive alias
    "type: t\nk: v\nk: w\n",  # a duplicate key
)
VALID_BODIES = (
    "",
    "# Title\n\nText.\n",
    "Body with [a link](cache.md) and a note [^s1].\n\n[^s1]: https://x\n",
    "no trailing newline",
    "---\nnot: frontmatter\n---\n",
    "# Citations\n\n[1] [Cache design](https://example.com/cache)\n",
    "é 🚀\n",
)
INVALID_BODIES = ("lone \ud800 surrogate\n",)
FRONTMATTERS = st.one_of(st.sampled_from(VALID_FRONTMATTERS), st.sampled_from(VALID_FRONTMATTERS),
                         st.sampled_from(INVALID_FRONTMATTERS))
BODIES = st.one_of(st.sampled_from(VALID_BODIES), st.sampled_from(VALID_BODIES),
                   st.sampled_from(VALID_BODIES), st.sampled_from(INVALID_BODIES))
WRITE_IDS = st.one_of(st.sampled_from(EXISTING), st.sampled_from(NEW_IDS),
                      st.sampled_from(BAD_IDS))

RANDOM_DIGEST = st.sampled_from(["sha256:" + "0" * 64, "sha256:" + "ab" * 32])

# Bundle edits: IDs that exist at the start, new ones (other folders, odd characters), ones that
# exist only after a rename, and folders that exist or not.
EDIT_IDS = st.sampled_from(EXISTING + EXISTING + ("fresh", "guides/brew", "café ü#1",
                                                  "deep/er/still", "moved/cache", "missing"))
NEW_EDIT_IDS = st.one_of(st.sampled_from(("fresh", "guides/brew", "café ü#1", "deep/er/still",
                                          "moved/cache", "guides/cache")), EDIT_IDS)
EDIT_FOLDERS = st.sampled_from(["", "", "", "guides", "moved", "nowhere"])


def edit_operations() -> st.SearchStrategy[dict[str, Any]]:
    return st.one_of(
        st.fixed_dictionaries({"op": st.just("rename"), "concept_id": EDIT_IDS,
                               "new_id": NEW_EDIT_IDS}),
        st.fixed_dictionaries({"op": st.just("rename"), "concept_id": st.sampled_from(EXISTING),
                               "new_id": NEW_EDIT_IDS}),
        st.fixed_dictionaries({"op": st.just("delete"), "concept_id": EDIT_IDS},
                              optional={"inbound": st.sampled_from(["refuse", "unlink"])}),
        st.fixed_dictionaries({
            "op": st.just("append_log"), "folder": EDIT_FOLDERS,
            "date": st.one_of(st.sampled_from(DATES), st.sampled_from(DATES + BAD_DATES)),
            "entry": st.sampled_from(["**Update**: renamed the cache.",
                                      "See [the note](/note.md).", "See [gone](/gone.md)."]),
        }),
        st.fixed_dictionaries({"op": st.just("regenerate_index"), "folder": EDIT_FOLDERS}),
    )


EDIT_REQUESTS = st.fixed_dictionaries({
    "operations": st.lists(edit_operations(), min_size=1, max_size=2),
})
# Edits that usually plan cleanly: a rename of a starting concept to a new ID (a deletion of the
# renamed one, unlinking), a log entry, the root index.
VALID_EDITS = st.fixed_dictionaries({"operations": st.one_of(
    st.tuples(st.sampled_from(EXISTING), st.sampled_from(("guides/cache", "moved/x", "fresh")))
    .map(lambda p: [{"op": "rename", "concept_id": p[0], "new_id": p[1]}]),
    st.tuples(st.sampled_from(EXISTING), st.sampled_from(("moved/y", "fresh")))
    .map(lambda p: [{"op": "rename", "concept_id": p[0], "new_id": p[1]},
                    {"op": "delete", "concept_id": p[1], "inbound": "unlink"}]),
    st.sampled_from(DATES).map(lambda d: [{"op": "append_log", "folder": "", "date": d,
                                           "entry": "**Update**: edited."}]),
    st.just([{"op": "regenerate_index", "folder": ""}]),
)})


# ============================================================================ the machine


@dataclass
class Stored:
    """A preview (or the failure of one) remembered for later applies, fresh or stale."""

    tool: str
    args: dict[str, Any]
    answer: dict[str, Any]
    revision: str  # the model's revision when it was previewed


class WriteMachine(RuleBasedStateMachine):
    patch_previews = Bundle("patch_previews")
    migration_previews = Bundle("migration_previews")
    temporal_previews = Bundle("temporal_previews")
    edit_previews = Bundle("edit_previews")

    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(os.path.realpath(tempfile.mkdtemp(prefix="bundle-stateful-")))
        self.root = self.tmp / "bundle"
        build_bundle(self.root)
        self.dispatcher = self._new_dispatcher()
        self.files, self.dirs = read_tree(self.root)
        # After an interrupted (or publishing-then-failed) apply: the two states the files may
        # be in once the next read has recovered, as (name, files).
        self.uncertain: list[tuple[str, dict[str, bytes]]] | None = None
        self.answers: dict[str, dict[str, Any]] = {}  # canonical request -> first success
        # (tool, arguments, the files its plan writes, whether it died before checking its plan)
        self.last_crash: tuple[str, dict[str, Any], dict[str, bytes], bool] | None = None
        self.log: list[str] = []

    @initialize(declared=st.booleans())
    def start(self, declared: bool) -> None:
        """Start at v0.1 (migrations have work) or declared v0.2 (the temporal upgrade has)."""
        if declared:
            index = self.root / "index.md"
            index.write_bytes(b'---\nokf_version: "0.2"\n---\n' + index.read_bytes())
            self.files, self.dirs = read_tree(self.root)

    def teardown(self) -> None:
        HARNESS.arm(None)
        shutil.rmtree(self.tmp, ignore_errors=True)

    # -- calls

    def _new_dispatcher(self) -> Dispatcher:
        return Dispatcher(ServeConfig(bundles=(str(self.root),)), CONTRACTS, tools=TOOLS)

    def call(self, tool: str, args: dict[str, Any]) -> Outcome:
        """One call through the dispatcher; invariant (e): never internal_error."""
        outcome = self.dispatcher.call(tool, args)
        code = outcome.structured.get("code") if outcome.is_error else "ok"
        self.log.append(f"{tool} -> {code}")
        if tool not in ("list_concepts", "validate_bundle", "search_sections"):
            STATS[f"{tool}: {code if outcome.is_error else outcome.structured.get('status')}"] += 1
        assert code != "internal_error", (
            f"{tool} answered internal_error for {canonical(args)[:2000]}: {outcome.structured}"
        )
        return outcome

    def _preview(self, tool: str, args: dict[str, Any]) -> Stored:
        before = self.files
        HARNESS.arm(None)
        outcome = self.call(tool, args)
        assert not HARNESS.calls, f"{tool} (a preview) reached apply_writes"
        answer = outcome.structured
        if not outcome.is_error:
            assert answer["base_revision"] == revision(before), (tool, answer)
            if answer.get("status") in ("noop", "incomplete"):
                assert answer["result_revision"] == answer["base_revision"], answer
        return Stored(tool, args, {"is_error": outcome.is_error, **answer}, revision(before))

    def _apply(
        self, tool: str, args: dict[str, Any], *, crash_at: int | None = None,
        must_succeed: bool = False,
    ) -> tuple[Outcome | None, ApplyCall | None]:
        """Run one write call and update the model (or mark it uncertain after a crash)."""
        before = dict(self.files)
        base = revision(before)
        HARNESS.arm(crash_at)
        died: SimulatedDeath | None = None
        outcome = None
        try:
            outcome = self.call(tool, args)
        except SimulatedDeath as exc:
            died = exc
        finally:
            apply_calls = HARNESS.calls
            HARNESS.arm(None)
        assert len(apply_calls) <= 1, f"{tool} called apply_writes {len(apply_calls)} times"
        call = apply_calls[0] if apply_calls else None
        after = merged(before, call.writes) if call is not None else dict(before)

        if died is not None:
            self.log.append(f"  died at step {died.args[0]!r} (steps {call.steps if call else []})")
            STATS[f"{tool} died at {died.args[0].split(':')[0]}"] += 1
            self.uncertain = [("old", before), ("new", after)]
            # Died at "locked": the plan was never checked against the disk, so its retry is a
            # first attempt and may be refused like any other (a folder named like a file).
            self.last_crash = (tool, args, after, died.args[0] == "locked")
            return None, call

        assert outcome is not None
        answer = outcome.structured
        if outcome.is_error:
            assert not must_succeed, f"retrying {tool} failed: {answer}"
            reached_publishing = call is not None and "publishing" in call.steps
            # Before publishing an error leaves every file untouched; once publishing began the
            # apply completes on the next access (or stays old if it can be rolled back).
            self.uncertain = [("old", before), ("new", after)] if reached_publishing else None
            self.files = before
            return outcome, call

        status = answer.get("status")
        if status in ("applied", "success"):
            assert call is not None, (
                f"{tool} answered {status} without calling apply_writes through the harness: "
                "apply_writes is imported somewhere harnessed_apply_writes() does not patch"
            )
        if call is None or call.receipt is None:  # e.g. a rejected plan: nothing published
            self.files = before
            return outcome, call
        receipt = call.receipt
        key = canonical([tool, args])
        if receipt.replayed:
            after = before  # a replay writes nothing
            if key in self.answers:
                assert answer == self.answers[key], (
                    f"the replay of {tool} answered differently:\n{answer}\n"
                    f"vs\n{self.answers[key]}"
                )
        else:
            assert receipt.base_revision == base, (receipt, base)
            # A receipt is rewritten by every apply of the same request: a later replay
            # answers as the latest apply did, not the first.
            self.answers[key] = answer
        changed = sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p))
        if not receipt.replayed:
            assert sorted(receipt.changed_paths) == changed, (receipt.changed_paths, changed)
        assert answer["result_revision"] == revision(after), (
            f"{tool} reports result {answer['result_revision']}, the files it wrote make "
            f"{revision(after)}"
        )
        if "changed_paths" in answer and not receipt.replayed:
            assert answer["changed_paths"] == changed, (answer["changed_paths"], changed)
            assert status == ("applied" if changed else "noop"), answer
        if "base_revision" in answer and not receipt.replayed:
            assert answer["base_revision"] == base, answer
        self.files = after
        return outcome, call

    # -- concept patches

    @rule(target=patch_previews, request=patch_requests())
    def preview_patch(self, request: dict[str, Any]) -> Stored:
        self.last_crash = None
        stored = self._preview("preview_concept_patch", request)
        answer = stored.answer
        if not answer["is_error"]:
            assert answer["status"] in ("applicable", "noop", "rejected"), answer
            if answer["status"] == "rejected":
                assert answer["plan_digest"] is None and answer["diagnostics"], answer
        return stored

    @rule(
        stored=patch_previews,
        how=st.sampled_from(["as_previewed", "as_previewed", "forged_digest", "forged_revision",
                             "other_actor"]),
        digest=RANDOM_DIGEST,
    )
    def apply_patch(self, stored: Stored, how: str, digest: str) -> None:
        self.last_crash = None
        answer = stored.answer
        args = dict(stored.args)
        revision_ = answer.get("base_revision") or stored.revision
        plan = answer.get("plan_digest") or digest
        if how == "forged_digest":
            plan = digest
        elif how == "forged_revision":
            revision_ = digest
        elif how == "other_actor":
            args["actor"] = "human:mallory"
        args.update(expected_revision=revision_, expected_plan_digest=plan)
        fresh = stored.revision == revision(self.files)
        outcome, _ = self._apply("apply_concept_patch", args)
        self._check_apply_answer(stored, how, fresh, outcome, plan_tool="patch")

    # -- v0.2 migration

    @rule(target=migration_previews, request=migration_requests())
    def preview_migration(self, request: dict[str, Any]) -> Stored:
        self.last_crash = None
        stored = self._preview("preview_v02_migration", request)
        answer = stored.answer
        if not answer["is_error"]:
            assert answer["status"] in ("applicable", "noop", "blocked"), answer
        return stored

    @rule(
        stored=migration_previews,
        how=st.sampled_from(["as_previewed", "as_previewed", "forged_digest", "stale_proof",
                             "no_proof", "other_policy"]),
        digest=RANDOM_DIGEST,
    )
    def apply_migration(self, stored: Stored, how: str, digest: str) -> None:
        self.last_crash = None
        answer = stored.answer
        if answer["is_error"]:
            return  # an apply needs the preview's source object
        args = dict(stored.args, expected_source=answer["source"])
        if answer.get("proof") is not None and how != "no_proof":
            args["proof"] = dict(answer["proof"])
            args["expected_plan_digest"] = answer["plan_digest"]
        if how == "forged_digest":
            args["expected_plan_digest"] = digest
        elif how == "stale_proof" and "proof" in args:
            args["proof"]["base_revision"] = digest
        elif how == "other_policy":
            args["timestamp_policy"] = (
                "preserve" if args["timestamp_policy"] == "remove_after_copy"
                else "remove_after_copy"
            )
        fresh = stored.revision == revision(self.files)
        outcome, _ = self._apply("apply_v02_migration", args)
        self._check_apply_answer(stored, how, fresh, outcome, plan_tool="migration")

    # -- temporal upgrade

    def _temporal_request(self, mode: str, upgrade_id: str, to: str) -> dict[str, Any]:
        """Mappings made from the bundle's unresolved dates (a first preview lists them)."""
        probe = self.call("preview_temporal_upgrade", {"id": upgrade_id, "actor": "human:ann"})
        args: dict[str, Any] = {"id": upgrade_id, "actor": "human:ann"}
        if probe.is_error or mode == "none":
            return args
        unresolved = probe.structured["unresolved"]
        mappings = [dict(u, to=u["from"] + to) for u in unresolved]
        if mode == "partial":
            mappings = mappings[1:]
        elif mode == "wrong_from" and mappings:
            mappings[0]["from"] = "1999-01-01"
            mappings[0]["to"] = "1999-01-01" + to
        elif mode == "bad_path" and mappings:
            mappings[0]["path"] = "sources[99].last_modified"
        elif mode == "duplicate" and mappings:
            mappings.append(dict(mappings[0], to=mappings[0]["from"] + "T01:02:03Z"))
        elif mode == "no_offset" and mappings:
            mappings[0]["to"] = mappings[0]["from"] + "T00:00:00"
        args["mappings"] = mappings
        return args

    @rule(
        target=temporal_previews,
        mode=TEMPORAL_MODES,
        upgrade_id=st.sampled_from(["up-1", "up-2"]),
        to=st.sampled_from(["T00:00:00Z", "T12:30:00+02:00", "T23:59:59.999-05:00"]),
    )
    def preview_temporal(self, mode: str, upgrade_id: str, to: str) -> Stored:
        self.last_crash = None
        request = self._temporal_request(mode, upgrade_id, to)
        stored = self._preview("preview_temporal_upgrade", request)
        answer = stored.answer
        if not answer["is_error"]:
            assert answer["status"] in ("ready", "incomplete", "noop"), answer
            assert (answer["plan_digest"] is None) == (answer["status"] != "ready"), answer
        return stored

    @rule(
        stored=temporal_previews,
        how=st.sampled_from(["as_previewed", "as_previewed", "forged_digest", "forged_revision",
                             "other_id"]),
        digest=RANDOM_DIGEST,
    )
    def apply_temporal(self, stored: Stored, how: str, digest: str) -> None:
        self.last_crash = None
        answer = stored.answer
        args = dict(stored.args)
        args.setdefault("mappings", [])
        args["base_revision"] = answer.get("base_revision") or stored.revision
        args["plan_digest"] = answer.get("plan_digest") or digest
        if how == "forged_digest":
            args["plan_digest"] = digest
        elif how == "forged_revision":
            args["base_revision"] = digest
        elif how == "other_id":
            args["id"] = "up-other"
        fresh = stored.revision == revision(self.files)
        outcome, _ = self._apply("apply_temporal_upgrade", args)
        self._check_apply_answer(stored, how, fresh, outcome, plan_tool="temporal")

    # -- bundle edits

    @rule(target=edit_previews, request=EDIT_REQUESTS)
    def preview_edit(self, request: dict[str, Any]) -> Stored:
        self.last_crash = None
        stored = self._preview("preview_bundle_edit", request)
        answer = stored.answer
        if not answer["is_error"]:
            assert answer["status"] in ("applicable", "noop", "rejected"), answer
            assert (answer["plan_digest"] is None) == (answer["status"] == "rejected"), answer
        return stored

    @rule(
        stored=edit_previews,
        how=st.sampled_from(["as_previewed", "as_previewed", "forged_digest",
                             "forged_revision"]),
        digest=RANDOM_DIGEST,
    )
    def apply_edit(self, stored: Stored, how: str, digest: str) -> None:
        self.last_crash = None
        answer = stored.answer
        args = dict(stored.args)
        revision_ = answer.get("base_revision") or stored.revision
        plan = answer.get("plan_digest") or digest
        if how == "forged_digest":
            plan = digest
        elif how == "forged_revision":
            revision_ = digest
        args.update(expected_revision=revision_, expected_plan_digest=plan)
        fresh = stored.revision == revision(self.files)
        outcome, _ = self._apply("apply_bundle_edit", args)
        self._check_apply_answer(stored, how, fresh, outcome, plan_tool="edit")

    # -- write_concept

    @rule(concept_id=WRITE_IDS, frontmatter=FRONTMATTERS, body=BODIES)
    def write_concept(self, concept_id: str, frontmatter: str, body: str) -> None:
        self.last_crash = None
        args = {"concept_id": concept_id, "frontmatter": frontmatter, "body": body}
        outcome, call = self._apply("write_concept", args)
        assert outcome is not None
        if not outcome.is_error:
            assert outcome.structured["path"] == concept_id + ".md"
            assert call is not None and list(call.writes) == [concept_id + ".md"]
            data = self.files[concept_id + ".md"]
            assert data.endswith(body.encode("utf-8")), "the body was not kept byte for byte"

    # -- interruption

    @rule(
        crash_at=st.integers(1, 9),
        restart=st.booleans(),
        concept_id=st.sampled_from(EXISTING + NEW_IDS),
        frontmatter=st.sampled_from(VALID_FRONTMATTERS),
        body=st.sampled_from(VALID_BODIES),
    )
    def interrupted_write(
        self, crash_at: int, restart: bool, concept_id: str, frontmatter: str, body: str
    ) -> None:
        """A valid write_concept dies at its crash_at-th publication step."""
        self.last_crash = None
        args = {"concept_id": concept_id, "frontmatter": frontmatter, "body": body}
        self._interrupt("write_concept", args, crash_at, restart)

    @rule(concept_id=st.sampled_from(EXISTING), text=st.sampled_from(["\nEdited.\n", "x"]))
    def external_edit(self, concept_id: str, text: str) -> None:
        """Someone edits a concept on disk, outside the server (stored previews go stale)."""
        self.last_crash = None
        path = concept_id + ".md"
        if path not in self.files:
            return
        data = self.files[path] + text.encode("utf-8")
        (self.root / path).write_bytes(data)
        self.files[path] = data

    @rule(
        kind=st.sampled_from(["patch", "migration", "temporal", "edit", "edit"]),
        crash_at=st.integers(1, 9),
        restart=st.booleans(),
        request=VALID_PATCHES,
        policy=st.sampled_from(["preserve", "remove_after_copy"]),
        edit=st.one_of(VALID_EDITS, VALID_EDITS, EDIT_REQUESTS),
    )
    def interrupted_apply(
        self, kind: str, crash_at: int, restart: bool, request: dict[str, Any], policy: str,
        edit: dict[str, Any],
    ) -> None:
        """A fresh preview, then its apply dies at the crash_at-th publication step."""
        self.last_crash = None
        planned = self._fresh_plan(kind, edit if kind == "edit" else request, policy)
        if planned is not None:
            tool, args, predicted = planned
            self._interrupt(tool, args, crash_at, restart, predicted)

    @rule(
        kind=st.sampled_from(["patch", "migration", "temporal", "edit", "edit"]),
        request=VALID_PATCHES,
        policy=st.sampled_from(["preserve", "remove_after_copy"]),
        edit=st.one_of(VALID_EDITS, VALID_EDITS, EDIT_REQUESTS),
    )
    def preview_and_apply(
        self, kind: str, request: dict[str, Any], policy: str, edit: dict[str, Any]
    ) -> None:
        """The happy path: a fresh, applicable preview applied at once must succeed."""
        self.last_crash = None
        planned = self._fresh_plan(kind, edit if kind == "edit" else request, policy)
        if planned is not None:
            tool, args, predicted = planned
            outcome, _ = self._apply(tool, args, must_succeed=True)
            assert outcome is not None and outcome.structured["status"] in ("applied", "noop")
            assert outcome.structured["result_revision"] == predicted, (
                f"{tool} published {outcome.structured['result_revision']}, its preview "
                f"promised {predicted}")

    def _fresh_plan(
        self, kind: str, request: dict[str, Any], policy: str
    ) -> tuple[str, dict[str, Any], str] | None:
        """(apply tool, arguments, the previewed result revision) for a fresh applicable
        preview, or None when there is none."""
        if kind == "edit":
            preview = self._preview("preview_bundle_edit", request).answer
            if preview["is_error"] or preview["plan_digest"] is None:
                return None
            return "apply_bundle_edit", dict(
                request, expected_revision=preview["base_revision"],
                expected_plan_digest=preview["plan_digest"]), preview["result_revision"]
        if kind == "patch":
            preview = self._preview("preview_concept_patch", request).answer
            if preview["is_error"] or preview["plan_digest"] is None:
                return None
            return "apply_concept_patch", dict(
                request, expected_revision=preview["base_revision"],
                expected_plan_digest=preview["plan_digest"]), preview["result_revision"]
        if kind == "migration":
            migration = {"generated_by": "human:migrator", "timestamp_policy": policy,
                         "citation_mappings": VALID_MAPPINGS}
            preview = self._preview("preview_v02_migration", migration).answer
            if preview["is_error"] or preview["plan_digest"] is None:
                return None
            return "apply_v02_migration", dict(
                migration, expected_source=preview["source"], proof=preview["proof"],
                expected_plan_digest=preview["plan_digest"]), preview["result_revision"]
        temporal = self._temporal_request("all", "up-fresh", "T08:00:00+01:00")
        preview = self._preview("preview_temporal_upgrade", temporal).answer
        if preview["is_error"] or preview["plan_digest"] is None:
            return None
        return "apply_temporal_upgrade", dict(
            temporal, base_revision=preview["base_revision"], plan_digest=preview["plan_digest"]
        ), preview["result_revision"]

    def _interrupt(
        self, tool: str, args: dict[str, Any], crash_at: int, restart: bool,
        predicted: str | None = None,
    ) -> None:
        """Apply with a death at step crash_at (an apply with fewer steps just completes)."""
        outcome, call = self._apply(tool, args, crash_at=crash_at)
        if outcome is None and predicted is not None and call is not None and call.writes:
            # (c) the result the interrupted apply was heading for is the one its preview named
            new = self.uncertain[1][1] if self.uncertain else self.files
            assert revision(new) == predicted, "the apply's writes are not the previewed plan"
        if outcome is None and restart:
            self.dispatcher = self._new_dispatcher()  # the server process started again
            self.log.append("  restarted the server")

    @precondition(lambda self: self.last_crash is not None)
    @rule()
    def retry_interrupted(self) -> None:
        """Sending the interrupted call again completes it (or redoes it) and ends at new."""
        assert self.last_crash is not None
        tool, args, after, unchecked = self.last_crash
        self.last_crash = None
        before = dict(self.files)
        outcome, _ = self._apply(tool, args, must_succeed=not unchecked)
        assert outcome is not None
        if outcome.is_error:
            # Only a call that died before its plan was checked may be refused, and then it
            # changed nothing (the invariant compares the disk with the model).
            assert unchecked and self.files == before, outcome.structured
            STATS[f"retry of {tool}: refused, as a first attempt would be"] += 1
            return
        assert self.files == after, "the retried apply did not end at its new state"
        STATS[f"retry of {tool}: ok"] += 1

    @rule()
    def restart_server(self) -> None:
        self.dispatcher = self._new_dispatcher()

    # -- answers

    def _check_apply_answer(
        self, stored: Stored, how: str, fresh: bool, outcome: Outcome | None, plan_tool: str
    ) -> None:
        """What an apply of a stored preview may answer, given how fresh the preview is."""
        assert outcome is not None
        answer = outcome.structured
        preview = stored.answer
        if outcome.is_error:
            assert answer["code"] in (
                "revision_conflict", "plan_mismatch", "operation_rejected", "invalid_request",
                "resource_limit",
            ), answer
            if (how == "as_previewed" and fresh and not preview["is_error"]
                    and preview.get("plan_digest") is not None):
                # an unchanged bundle and the preview's own digest: the apply must go through
                # (unless it is a replay of an earlier identical apply, which also succeeds)
                raise AssertionError(f"a fresh {plan_tool} preview failed to apply: {answer}")
            return
        if how == "as_previewed" and fresh and preview.get("result_revision"):
            if preview.get("status") in ("applicable", "ready"):
                assert answer["result_revision"] == preview["result_revision"], (
                    preview, answer)

    # -- the invariant

    @invariant()
    def bundle_is_whole(self) -> None:
        # (a) the next read recovers any interrupted apply and the bundle loads
        listed = self.call("list_concepts", {})
        assert not listed.is_error, f"the bundle no longer loads: {listed.structured}"
        validated = self.call("validate_bundle", {})
        assert not validated.is_error, validated.structured
        # (b) every file wholly old or wholly new, all files of one apply agreeing
        disk, dirs = read_tree(self.root)
        candidates = self.uncertain or [("model", self.files)]
        matches = [(name, files) for name, files in candidates if files == disk]
        assert matches, (
            "the files on disk are neither the state before nor the state after the apply "
            "(or stray files are left outside .bundle-mcp/):\n" + describe(disk, candidates)
            + "\ncalls: " + "; ".join(self.log[-12:])
        )
        if self.uncertain is not None and self.uncertain[0][1] != self.uncertain[1][1]:
            STATS["recovered to " + "/".join(name for name, _ in matches)] += 1
        self.files = dict(matches[0][1])
        self.uncertain = None
        # (d) no stray folders (stray files are caught by the comparison above)
        expected_dirs = self.dirs | parents(self.files)
        assert dirs == expected_dirs, (
            f"folders on disk {sorted(dirs)} differ from the model's {sorted(expected_dirs)}"
        )
        self.dirs = expected_dirs
        # (c) the revision served is the revision of the files on disk
        served = self.call("search_sections", {"query": "zzzz"})
        assert not served.is_error, served.structured
        assert "sha256:" + served.structured["snapshot_revision"] == revision(self.files), (
            "the served revision is not the revision of the files on disk"
        )
        # (a, continued) the listing agrees with the disk and the bundle stays conformant
        assert [c["id"] for c in listed.structured["concepts"]] == concept_ids(self.files)
        assert validated.structured["conformance"]["conformant"], validated.structured


FAST = settings(
    max_examples=int(os.environ.get("STATEFUL_FAST_EXAMPLES", "40")),
    stateful_step_count=15,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    # no "explain" phase: its line tracing makes a failing run take minutes, and the shrunk
    # sequence of calls is the reproduction
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
)


def _long_examples() -> int:
    if "STATEFUL_EXAMPLES" in os.environ:
        return int(os.environ["STATEFUL_EXAMPLES"])
    return 10 if _PROFILE == "ci" else 60


LONG = settings(
    FAST,
    max_examples=_long_examples(),
    stateful_step_count=40,
)


def _report() -> None:
    """With STATEFUL_STATS=1, print what the calls answered (run pytest with -s to see it)."""
    if os.environ.get("STATEFUL_STATS"):
        for key, count in sorted(STATS.items()):
            print(f"{count:6d}  {key}")
    STATS.clear()


def test_writes_stateful() -> None:
    with harnessed_apply_writes():
        run_state_machine_as_test(WriteMachine, settings=FAST)
    _report()


@pytest.mark.slow
def test_writes_stateful_long() -> None:
    with harnessed_apply_writes():
        run_state_machine_as_test(WriteMachine, settings=LONG)
    _report()


# ============================================================================ real SIGKILL

# The child applies one write through a dispatcher of its own, with a step hook that records
# each step on stdout and SIGKILLs the process at the named one: no finally block, no __exit__,
# no flush of anything runs after that. Before publishing it saves the planned writes (path ->
# base64 bytes) so the parent knows the "new" state.
CHILD = r"""
import base64, inspect, json, os, signal, sys
from bundle_mcp.contracts import ContractSet
from bundle_mcp.dispatch import Dispatcher, ServeConfig
from bundle_mcp.tools import load_tools
from bundle_mcp.writes import publish

spec = json.loads(sys.argv[1])
tools = load_tools(tuple(spec["tools"]))
original = publish.apply_writes
signature = inspect.signature(original)

def apply_writes(*args, **kwargs):
    bound = signature.bind(*args, **kwargs)
    writes = tuple(bound.arguments["writes"])
    bound.arguments["writes"] = writes
    if writes:
        with open(spec["plan_file"], "w", encoding="utf-8") as out:
            json.dump({w.path: None if w.new_bytes is None
                       else base64.b64encode(w.new_bytes).decode() for w in writes}, out)

    def hook(step):
        print(step, flush=True)
        if step == spec["kill_at"]:
            os.kill(os.getpid(), signal.SIGKILL)

    bound.arguments["step_hook"] = hook
    return original(*bound.args, **bound.kwargs)

for name, module in list(sys.modules.items()):
    if name.startswith("bundle_mcp") and module is not publish and \
            getattr(module, "apply_writes", None) is original:
        module.apply_writes = apply_writes
dispatcher = Dispatcher(ServeConfig(bundles=(spec["bundle"],)), ContractSet(), tools=tools)
outcome = dispatcher.call(spec["tool"], spec["args"])
print("RESULT " + json.dumps(outcome.structured), flush=True)
"""

# (apply, step to die at): a two-file migration (cache.md, then the root index.md last) and a
# write_concept that creates its folder. "replaced:cache.md" dies with cache.md new and index.md
# old on disk: the torn moment recovery exists for.
SIGKILL_CASES = [
    ("migration", "journal_written"),
    ("migration", "staged:index.md"),
    ("migration", "publishing"),
    ("migration", "replaced:cache.md"),
    ("migration", "receipt_written"),
    ("new_folder", "staged:guides/brew.md"),
    ("new_folder", "replaced:guides/brew.md"),
    # a rename into a new folder: cache.md deleted, guides/cache.md created, note.md's link and
    # the root index.md rewritten. "deleted:cache.md" dies with the old file gone and every
    # referrer still naming it.
    ("rename", "staged:cache.md"),
    ("rename", "publishing"),
    ("rename", "deleted:cache.md"),
    ("rename", "replaced:note.md"),
    ("rename", "receipt_written"),
]


def _planned_call(dispatcher: Dispatcher, case: str) -> tuple[str, dict[str, Any]]:
    if case == "new_folder":
        return "write_concept", {"concept_id": "guides/brew",
                                 "frontmatter": "type: note\ntitle: Brew\n", "body": "# Brew\n"}
    if case == "rename":
        edit = {"operations": [{"op": "rename", "concept_id": "cache", "new_id": "guides/cache"}]}
        planned = dispatcher.call("preview_bundle_edit", edit).structured
        assert planned["status"] == "applicable", planned
        return "apply_bundle_edit", dict(edit, expected_revision=planned["base_revision"],
                                         expected_plan_digest=planned["plan_digest"])
    request = {"generated_by": "human:migrator", "timestamp_policy": "remove_after_copy",
               "citation_mappings": VALID_MAPPINGS}
    preview = dispatcher.call("preview_v02_migration", request).structured
    assert preview["status"] == "applicable", preview
    return "apply_v02_migration", dict(
        request, expected_source=preview["source"], proof=preview["proof"],
        expected_plan_digest=preview["plan_digest"])


@pytest.mark.parametrize(("case", "kill_at"), SIGKILL_CASES)
def test_sigkill_at_a_publication_step_recovers_old_or_new(
    tmp_path: Path, case: str, kill_at: str
) -> None:
    base = Path(os.path.realpath(tmp_path))
    root = base / "bundle"
    build_bundle(root)
    tool, args = _planned_call(
        Dispatcher(ServeConfig(bundles=(str(root),)), CONTRACTS, tools=TOOLS), case)
    before, before_dirs = read_tree(root)
    plan_file = base / "plan.json"
    spec = {"bundle": str(root), "tool": tool, "args": args, "kill_at": kill_at,
            "plan_file": str(plan_file), "tools": list(TOOL_NAMES)}
    child = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(spec)],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert child.returncode == -signal.SIGKILL, (
        f"the child was not killed at {kill_at!r} (exit {child.returncode}):\n"
        f"{child.stdout}\n{child.stderr}"
    )
    assert child.stdout.split()[-1] == kill_at, child.stdout
    planned = json.loads(plan_file.read_text(encoding="utf-8"))
    after = merged(before, {p: None if b is None else base64.b64decode(b)
                            for p, b in planned.items()})
    assert after != before

    # Between the kill and the next look: every visible Markdown file is whole (old or new).
    raw, _ = read_tree(root)
    for path, data in raw.items():
        if not any(s.startswith(".") for s in path.split("/")):
            assert data in (before.get(path), after.get(path)), f"{path} is torn"
    if kill_at == "replaced:cache.md":  # the case really is torn until recovery runs
        assert (raw["cache.md"], raw["index.md"]) == (after["cache.md"], before["index.md"])

    # A new server process: its first read recovers, and the bundle is wholly old or new.
    dispatcher = Dispatcher(ServeConfig(bundles=(str(root),)), CONTRACTS, tools=TOOLS)
    listed = dispatcher.call("list_concepts", {})
    assert not listed.is_error, f"the bundle no longer loads: {listed.structured}"
    validated = dispatcher.call("validate_bundle", {})
    assert not validated.is_error and validated.structured["conformance"]["conformant"]
    disk, dirs = read_tree(root)
    states = [("old", before), ("new", after)]
    assert disk in (before, after), (
        "after recovery the files are neither old nor new (or stray files are left):\n"
        + describe(disk, states))
    assert dirs == before_dirs | parents(disk), sorted(dirs)
    served = dispatcher.call("search_sections", {"query": "zzzz"}).structured
    assert "sha256:" + served["snapshot_revision"] == revision(disk)
    assert [c["id"] for c in listed.structured["concepts"]] == concept_ids(disk)

    # Sending the interrupted call again completes it: the bundle ends wholly new.
    retried = dispatcher.call(tool, args)
    assert not retried.is_error, retried.structured
    assert retried.structured["result_revision"] == revision(after)
    final, final_dirs = read_tree(root)
    assert final == after, describe(final, states)
    assert final_dirs == before_dirs | parents(after)
