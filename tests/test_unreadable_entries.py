"""What the loader does when the operating system refuses part of a bundle.

A root that opens but cannot be listed is a bad ``bundle_path`` (``invalid_request``, exit 2 from
``bundle-mcp validate``). Below the root, every refusal is a skip finding, never a crash:
``unreadable_entry`` (ERROR for a Markdown file or a folder, WARN for anything else) or, for an
entry that vanished or was replaced during the walk, ``path_changed``.

Three kinds of test: faults injected into the ``os`` calls of the walk (every errno, on any
machine), real procfs and sysfs trees (``/proc``, ``/sys``), and real ``chmod 000`` entries read
by a process without the DAC capabilities (``setpriv``), since root reads anything otherwise.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import io
import json
import os
import shutil
import stat
import subprocess
import textwrap
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from bundle_mcp import validate_cli
from bundle_mcp.cancel import CancelToken
from bundle_mcp.contracts import ContractSet
from bundle_mcp.dispatch import Dispatcher, ServeConfig
from bundle_mcp.errors import BundleError
from bundle_mcp.loader import load_bundle
from bundle_mcp.loader.capture import MAX_SKIPPED
from bundle_mcp.model import Snapshot
from bundle_mcp.storage.handles import pin_root

REPO = Path(__file__).resolve().parent.parent
BIN = REPO / ".venv" / "bin"
FM = "---\ntype: note\n---\n"
READ_TOOLS: dict[str, dict[str, Any]] = {
    "list_concepts": {},
    "validate_bundle": {},
    "search_concepts": {"query": "a"},
}
# What a call on a tree we do not control may answer: a result, or one of these envelopes.
DOCUMENTED_FAILURES = {"invalid_request", "resource_limit", "operation_rejected"}
WALK_SECONDS = 60  # a cancellation deadline: the walks below take well under a second
CONTRACTS = ContractSet()
# The module, not the function ``bundle_mcp.loader.capture`` that shadows it on the package.
capture_module = importlib.import_module("bundle_mcp.loader.capture")


def make_bundle(root: Path, files: dict[str, str]) -> str:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")
    return os.path.realpath(root)


BUNDLE = {
    "index.md": "# Index\n\n- [a](a.md)\n",
    "a.md": FM + "# A\n",
    "secret.md": FM + "# Secret\n",
    "locked/b.md": FM + "# B\n",
    "pics/photo.png": "not really a png",
}


def findings(snapshot: Snapshot) -> list[tuple[str | None, str, str]]:
    return sorted((d.file, d.code, d.severity) for d in snapshot.skipped)


def identity(path: Path) -> tuple[int, int]:
    st = os.stat(path, follow_symlinks=False)
    return (st.st_dev, st.st_ino)


def fd_identity(fd: int) -> tuple[int, int]:
    st = os.fstat(fd)
    return (st.st_dev, st.st_ino)


# --------------------------------------------------------------------------------------------
# Injected faults


@contextmanager
def failing(
    monkeypatch: pytest.MonkeyPatch, name: str, when: Callable[..., bool], code: int
) -> Iterator[None]:
    """Make ``os.<name>`` fail with ``code`` for the calls ``when(*args, **kwargs)`` picks."""
    real = getattr(os, name)

    def fake(*args: Any, **kwargs: Any) -> Any:
        if when(*args, **kwargs):
            raise OSError(code, os.strerror(code))
        return real(*args, **kwargs)

    # The walk calls ``os.<name>`` through the shared module; the predicates pick its calls out.
    with monkeypatch.context() as patch:
        patch.setattr(os, name, fake)
        yield


def on_folder(folder: Path) -> Callable[..., bool]:
    wanted = identity(folder)
    return lambda target, *_a, **_k: isinstance(target, int) and fd_identity(target) == wanted


def named(entry: str) -> Callable[..., bool]:
    return lambda target, *_a, **_k: target == entry and "dir_fd" in _k


@pytest.mark.parametrize("code", [errno.EACCES, errno.EPERM, errno.EIO])
def test_a_root_that_opens_but_cannot_be_listed_is_a_bad_bundle_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int
) -> None:
    root = make_bundle(tmp_path / "b", BUNDLE)
    with failing(monkeypatch, "scandir", on_folder(Path(root)), code):
        with pytest.raises(BundleError) as raised:
            load_bundle(root)
        outcome = Dispatcher(ServeConfig(allow_any_bundle=True)).call(
            "list_concepts", {"bundle_path": root}
        )
        exit_code, _out, err = run_validate(root)
    assert raised.value.code == "invalid_request"
    assert [d.field for d in raised.value.diagnostics] == ["$.bundle_path"]
    assert os.strerror(code) in raised.value.diagnostics[0].message
    assert outcome.is_error and outcome.structured["code"] == "invalid_request"
    CONTRACTS.check_envelope(outcome.structured)
    assert exit_code == 2
    assert err.startswith("bundle-mcp validate: invalid_request: ")
    assert root not in err  # messages never name a host path


@pytest.mark.parametrize("code", [errno.EACCES, errno.EPERM, errno.EIO])
def test_a_folder_that_cannot_be_listed_is_an_unreadable_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int
) -> None:
    root = make_bundle(tmp_path / "b", BUNDLE)
    with failing(monkeypatch, "scandir", on_folder(tmp_path / "b" / "locked"), code):
        snapshot, _ = load_bundle(root)
    assert findings(snapshot) == [("locked", "unreadable_entry", "ERROR")]
    assert os.strerror(code) in snapshot.skipped[0].message
    assert sorted(snapshot.concepts) == ["a", "secret"]
    assert "locked" not in snapshot.directories  # nothing of it was seen, so nothing to watch


@pytest.mark.parametrize(
    ("syscall", "code", "expected"),
    [
        ("scandir", errno.ENOENT, "path_changed"),  # removed between open and listing
        ("open", errno.EACCES, "unreadable_entry"),
        ("open", errno.EPERM, "unreadable_entry"),
        ("open", errno.EIO, "unreadable_entry"),
        ("open", errno.ENOENT, "path_changed"),
        ("open", errno.ENOTDIR, "path_changed"),  # replaced by a file
        ("open", errno.ELOOP, "path_changed"),  # replaced by a symlink (O_NOFOLLOW)
    ],
)
def test_folder_refusals_are_findings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, syscall: str, code: int, expected: str
) -> None:
    root = make_bundle(tmp_path / "b", BUNDLE)
    when = on_folder(tmp_path / "b" / "locked") if syscall == "scandir" else named("locked")
    with failing(monkeypatch, syscall, when, code):
        snapshot, _ = load_bundle(root)
    severity = "ERROR" if expected == "unreadable_entry" else "WARN"
    assert findings(snapshot) == [("locked", expected, severity)]
    assert sorted(snapshot.concepts) == ["a", "secret"]


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        (errno.EACCES, ("secret.md", "unreadable_entry", "ERROR")),
        (errno.EPERM, ("secret.md", "unreadable_entry", "ERROR")),
        (errno.EIO, ("secret.md", "unreadable_entry", "ERROR")),
        (errno.ENOENT, ("secret.md", "path_changed", "WARN")),
        (errno.ELOOP, ("secret.md", "path_changed", "WARN")),
    ],
)
def test_a_markdown_file_that_cannot_be_opened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int, expected: tuple[str, str, str]
) -> None:
    root = make_bundle(tmp_path / "b", BUNDLE)
    with failing(monkeypatch, "open", named("secret.md"), code):
        snapshot, _ = load_bundle(root)
    assert findings(snapshot) == [expected]
    assert sorted(snapshot.concepts) == ["a", "locked/b"]


@pytest.mark.parametrize("code", [errno.EIO, errno.EACCES])
def test_a_read_that_fails_mid_file_is_an_unreadable_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int
) -> None:
    root = make_bundle(tmp_path / "b", {**BUNDLE, "secret.md": FM + "x" * 3_000_000})
    wanted = identity(tmp_path / "b" / "secret.md")
    reads: list[int] = []

    def second_read_of_secret(fd: int, _n: int) -> bool:
        if fd_identity(fd) != wanted:
            return False
        reads.append(fd)
        return len(reads) > 1  # the first 1 MiB arrives, then the device fails

    with failing(monkeypatch, "read", second_read_of_secret, code):
        snapshot, _ = load_bundle(root)
    assert findings(snapshot) == [("secret.md", "unreadable_entry", "ERROR")]
    assert "secret" not in snapshot.concepts


def test_fstat_failure_after_open_is_an_unreadable_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = make_bundle(tmp_path / "b", BUNDLE)
    wanted = identity(tmp_path / "b" / "secret.md")
    with failing(monkeypatch, "fstat", lambda fd: fd_identity_raw(fd) == wanted, errno.EIO):
        snapshot, _ = load_bundle(root)
    assert findings(snapshot) == [("secret.md", "unreadable_entry", "ERROR")]


def fd_identity_raw(fd: int) -> tuple[int, int]:
    # os.stat, not os.fstat: the test replaces os.fstat.
    st = os.stat(f"/proc/self/fd/{fd}")
    return (st.st_dev, st.st_ino)


def test_entries_that_cannot_be_examined(tmp_path: Path) -> None:
    """A folder with read but no search permission lists its names; stat on each is refused.

    Faked with a listing whose ``stat`` fails, so that it runs as root too.
    """
    root = make_bundle(tmp_path / "b", {"index.md": "# Index\n"})

    class Entry:
        def __init__(self, name: str, folder: bool | None) -> None:
            self.name = name
            self._folder = folder

        def stat(self, *, follow_symlinks: bool = True) -> os.stat_result:
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))

        def is_dir(self, *, follow_symlinks: bool = True) -> bool:
            if self._folder is None:  # no d_type: is_dir has to stat, which fails too
                raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))
            return self._folder

    entries = [Entry("c.md", False), Entry("photo.png", False), Entry("sub", True),
               Entry("what", None)]
    fd = pin_root(root)
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(capture_module, "_list_folder", lambda _fd: entries)
            captured = capture_module.capture(fd, CancelToken())
    finally:
        os.close(fd)
    assert sorted((d.file, d.code, d.severity) for d in captured.skipped) == [
        ("c.md", "unreadable_entry", "ERROR"),
        ("photo.png", "unreadable_entry", "WARN"),  # an asset cannot hold a concept
        ("sub", "unreadable_entry", "ERROR"),  # a folder may
        ("what", "unreadable_entry", "ERROR"),  # unknown kind: assume the worst
    ]


def test_an_ignored_entry_that_cannot_be_examined_is_not_reported(tmp_path: Path) -> None:
    root = make_bundle(tmp_path / "b", {".okfignore": "drafts/\n", "index.md": "# Index\n"})

    class Entry:
        name = "drafts"

        def stat(self, *, follow_symlinks: bool = True) -> os.stat_result:
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))

        def is_dir(self, *, follow_symlinks: bool = True) -> bool:
            return True

    fd = pin_root(root)
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(capture_module, "_list_folder", lambda _fd: [Entry()])
            captured = capture_module.capture(fd, CancelToken())
    finally:
        os.close(fd)
    assert captured.skipped == ()


@pytest.mark.parametrize("code", [errno.EMFILE, errno.ENFILE, errno.ENOMEM])
def test_host_resource_errors_are_not_recorded_as_bundle_findings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int
) -> None:
    # A finding would stay in the cached snapshot while the bundle does not change.
    root = make_bundle(tmp_path / "b", BUNDLE)
    with failing(monkeypatch, "open", named("secret.md"), code):
        with pytest.raises(OSError) as raised:
            load_bundle(root)
        exit_code, out, err = run_validate(root)
    assert raised.value.errno == code
    assert (exit_code, out) == (2, "")
    assert err == f"bundle-mcp validate: the bundle cannot be read ({os.strerror(code)})\n"


@pytest.mark.parametrize("code", [errno.EACCES, errno.EIO])
def test_an_okfignore_that_cannot_be_read_refuses_the_bundle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int
) -> None:
    # Walking without its rules would serve what the author excluded.
    root = make_bundle(tmp_path / "b", {**BUNDLE, ".okfignore": "locked/\n"})
    with failing(monkeypatch, "open", named(".okfignore"), code):
        with pytest.raises(BundleError) as raised:
            load_bundle(root)
    assert raised.value.code == "invalid_request"
    assert ".okfignore" in raised.value.message


def test_an_okfignore_read_that_fails_refuses_the_bundle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = make_bundle(tmp_path / "b", {**BUNDLE, ".okfignore": "locked/\n"})
    wanted = identity(tmp_path / "b" / ".okfignore")
    with failing(monkeypatch, "read", lambda fd, _n: fd_identity(fd) == wanted, errno.EIO):
        with pytest.raises(BundleError) as raised:
            load_bundle(root)
    assert raised.value.code == "invalid_request"


def test_the_per_file_cap_counts_bytes_read_not_st_size() -> None:
    """procfs reports ``st_size`` 0 for files that have content; the cap must still hold."""
    proc = os.open("/proc/self", os.O_RDONLY | os.O_DIRECTORY)
    try:
        checked = os.stat("status", dir_fd=proc, follow_symlinks=False)
        assert checked.st_size == 0 and stat.S_ISREG(checked.st_mode)
        data, _key = capture_module._read_file("status", proc, checked, 1 << 20, "status")
        assert len(data) > 64
        with pytest.raises(BundleError) as raised:
            capture_module._read_file("status", proc, checked, 64, "status")
    finally:
        os.close(proc)
    assert raised.value.code == "resource_limit"


def test_too_many_skipped_entries_is_a_resource_limit(tmp_path: Path) -> None:
    root = tmp_path / "b"
    make_bundle(root, {"index.md": "# Index\n"})
    for n in range(MAX_SKIPPED + 1):
        os.symlink("index.md", root / f"link{n:05}")
    with pytest.raises(BundleError) as raised:
        load_bundle(os.path.realpath(root))
    assert raised.value.code == "resource_limit"


# --------------------------------------------------------------------------------------------
# procfs and sysfs


def run_validate(bundle: str, *flags: str) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser(prog="bundle-mcp validate")
    validate_cli.add_arguments(parser)
    out, err = io.StringIO(), io.StringIO()
    code = validate_cli.run(parser.parse_args([bundle, *flags]), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


SYSTEM_TREES = [p for p in ("/proc", "/sys") if os.path.isdir(p) and not os.path.islink(p)]


@pytest.mark.skipif(not SYSTEM_TREES, reason="no /proc or /sys on this system")
@pytest.mark.parametrize("tree", SYSTEM_TREES)
def test_loading_a_system_tree_ends_in_a_result_or_a_documented_error(tree: str) -> None:
    # The token's deadline, not a clock assertion, is what keeps a runaway walk from hanging.
    try:
        snapshot, _ = load_bundle(tree, CancelToken(WALK_SECONDS))
    except BundleError as exc:
        assert exc.code in DOCUMENTED_FAILURES
    else:
        codes = {d.code for d in snapshot.skipped}
        assert codes <= {"symlink_skipped", "special_file_skipped", "unreadable_entry",
                         "path_changed", "invalid_path_encoding"}


@pytest.mark.skipif(not SYSTEM_TREES, reason="no /proc or /sys on this system")
@pytest.mark.parametrize("tree", SYSTEM_TREES)
@pytest.mark.parametrize("tool", sorted(READ_TOOLS))
def test_read_tools_on_a_system_tree_never_fail_internally(tree: str, tool: str) -> None:
    outcome = Dispatcher(ServeConfig(allow_any_bundle=True)).call(
        tool, {"bundle_path": tree, **READ_TOOLS[tool]}, CancelToken(WALK_SECONDS)
    )
    if outcome.is_error:
        assert outcome.structured["code"] in DOCUMENTED_FAILURES, outcome.structured
        CONTRACTS.check_envelope(outcome.structured)


def _unlistable_system_folder() -> str | None:
    """A procfs folder that opens but refuses to be listed (``map_files`` of another process
    without CAP_SYS_ADMIN), or ``None``."""
    for candidate in ("/proc/1/map_files", "/proc/self/map_files"):
        try:
            fd = os.open(candidate, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            with os.scandir(fd) as it:
                list(it)
        except PermissionError:
            return candidate
        finally:
            os.close(fd)
    return None


@pytest.mark.skipif(not SYSTEM_TREES, reason="no /proc or /sys on this system")
@pytest.mark.parametrize("tree", SYSTEM_TREES)
def test_validate_cli_on_a_system_tree_exits_without_a_traceback(tree: str) -> None:
    done = subprocess.run(
        [str(BIN / "bundle-mcp"), "validate", tree],
        capture_output=True, text=True, timeout=WALK_SECONDS, check=False,
    )
    assert "Traceback" not in done.stderr
    if done.returncode == 2:  # a cap, or a root the kernel will not list
        assert done.stderr.startswith("bundle-mcp validate: "), done.stderr
    else:
        # Conformant, or not (folders like /proc/1/fdinfo refuse even root: ERROR findings).
        assert done.returncode in (0, 1), done.stderr
        assert done.stdout.splitlines()[-1].endswith("conformant"), done.stdout[-500:]


def test_validate_cli_exits_2_for_a_real_root_that_cannot_be_listed() -> None:
    folder = _unlistable_system_folder()
    if folder is None:
        pytest.skip("no procfs folder here opens but refuses to be listed")
    done = subprocess.run(
        [str(BIN / "bundle-mcp"), "validate", folder],
        capture_output=True, text=True, timeout=WALK_SECONDS, check=False,
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith(
        "bundle-mcp validate: invalid_request: bundle_path cannot be read"
    ), done.stderr
    outcome = Dispatcher(ServeConfig(allow_any_bundle=True)).call(
        "validate_bundle", {"bundle_path": folder}
    )
    assert outcome.is_error and outcome.structured["code"] == "invalid_request"


# --------------------------------------------------------------------------------------------
# chmod 000 for real, without the DAC capabilities

SETPRIV = shutil.which("setpriv")
DROP_DAC = [
    "--bounding-set=-dac_override,-dac_read_search",
    "--inh-caps=-dac_override,-dac_read_search",
]


def unprivileged(tmp_path: Path) -> list[str]:
    """The command prefix that runs a program unable to read a ``chmod 000`` file; skips the
    test when there is none."""
    probe = tmp_path / "probe"
    probe.write_text("secret")
    probe.chmod(0)
    try:
        if os.geteuid() != 0:
            prefix: list[str] = []
        elif SETPRIV is None:
            pytest.skip("running as root and setpriv is missing: cannot drop CAP_DAC_OVERRIDE")
        else:
            prefix = [SETPRIV, *DROP_DAC]
        done = subprocess.run([*prefix, "cat", str(probe)], capture_output=True, check=False)
        if done.returncode == 0:
            pytest.skip(
                "a chmod 000 file is still readable (setpriv could not drop "
                "CAP_DAC_OVERRIDE/CAP_DAC_READ_SEARCH here)"
            )
        return prefix
    finally:
        probe.chmod(0o600)


@pytest.fixture
def locked_bundle(tmp_path: Path) -> Iterator[str]:
    root = make_bundle(tmp_path / "b", {
        **BUNDLE,
        "pics/locked.png": "an asset",
        "noexec/c.md": FM + "# C\n",
        "noexec/pic.png": "an asset",
    })
    modes = {"secret.md": 0, "locked": 0, "pics/locked.png": 0, "noexec": 0o600}
    for rel, mode in modes.items():
        os.chmod(os.path.join(root, rel), mode)
    yield root
    for rel in modes:
        os.chmod(os.path.join(root, rel), 0o700)


UNREADABLE_FINDINGS = [
    ["locked", "ERROR", "unreadable_entry"],
    ["noexec/c.md", "ERROR", "unreadable_entry"],
    ["noexec/pic.png", "WARN", "unreadable_entry"],
    ["secret.md", "ERROR", "unreadable_entry"],
]


def test_chmod_000_entries_are_unreadable_not_changed(
    tmp_path: Path, locked_bundle: str
) -> None:
    prefix = unprivileged(tmp_path)
    done = subprocess.run(
        [*prefix, str(BIN / "bundle-mcp"), "validate", locked_bundle, "--format", "json"],
        capture_output=True, text=True, timeout=WALK_SECONDS, check=False,
    )
    assert "Traceback" not in done.stderr
    report = json.loads(done.stdout)
    got = sorted([d["file"], d["severity"], d["code"]] for d in report["diagnostics"]
                 if d["code"] in ("unreadable_entry", "path_changed"))
    assert got == UNREADABLE_FINDINGS
    assert done.returncode == 1  # an unreadable concept file or folder fails the bundle
    assert report["conformance"] == {"conformant": False, "errors": 3}
    # pics/locked.png is an asset: never opened, so its mode is never a finding.


UNPRIVILEGED_SCRIPT = textwrap.dedent("""
    import json, os, sys
    from bundle_mcp.dispatch import Dispatcher, ServeConfig
    bundle = sys.argv[1]
    dispatcher = Dispatcher(ServeConfig(bundles=(bundle,)))

    def call(tool, **args):
        outcome = dispatcher.call(tool, {"bundle_path": bundle, **args})
        return outcome.is_error, outcome.structured

    out = {}
    _, listed = call("list_concepts")
    out["before"] = [c["id"] for c in listed["concepts"]]
    _, report = call("validate_bundle")
    out["findings"] = sorted([d["file"], d["severity"], d["code"]] for d in report["diagnostics"]
                             if d["code"] in ("unreadable_entry", "path_changed"))
    out["conformant"] = report["conformance"]["conformant"]
    for rel in ("secret.md", "locked", "noexec"):
        os.chmod(os.path.join(bundle, rel), 0o700)
    _, listed = call("list_concepts")
    out["after"] = [c["id"] for c in listed["concepts"]]
    _, report = call("validate_bundle")
    out["after_findings"] = [d["code"] for d in report["diagnostics"]
                             if d["code"] in ("unreadable_entry", "path_changed")]
    print(json.dumps(out))
""")


def test_the_server_reports_unreadable_entries_and_sees_them_once_readable(
    tmp_path: Path, locked_bundle: str
) -> None:
    prefix = unprivileged(tmp_path)
    done = subprocess.run(
        [*prefix, str(BIN / "python"), "-c", UNPRIVILEGED_SCRIPT, locked_bundle],
        capture_output=True, text=True, timeout=WALK_SECONDS, check=False, cwd=REPO,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["before"] == ["a"]
    assert out["findings"] == UNREADABLE_FINDINGS
    assert out["conformant"] is False
    # The snapshot cache must not keep the refusal once the modes are fixed.
    assert out["after"] == ["a", "locked/b", "noexec/c", "secret"]
    assert out["after_findings"] == []
