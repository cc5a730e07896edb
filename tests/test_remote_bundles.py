"""Remote bundles (README, "Remote bundles"): a git URL or an archive, fetched into the cache
folder, served read-only, refreshed, its source naming the commit; archives unpacked with the
loader's defences. In process: the remote mounts and a dispatcher, repositories and archives
made in tmp_path, an archive served over HTTP by a thread of this process (no network)."""

from __future__ import annotations

import gzip
import http.server
import io
import os
import subprocess
import tarfile
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bundle_mcp import cli
from bundle_mcp.dispatch import Dispatcher, ServeConfig
from bundle_mcp.limits import Caps
from bundle_mcp.remote.archive import ArchiveRefused, member_path
from bundle_mcp.remote.location import is_remote, parse_location
from bundle_mcp.remote.mounts import FetchFailed, RemoteMounts

CONCEPT = "---\ntype: Guide\ntitle: {title}\n---\n# {title}\n"
INDEX = "# Notes\n\n- [Roast](notes/roast.md)\n"


def _git(repo: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update({"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1",
                "GIT_AUTHOR_NAME": "Ann", "GIT_AUTHOR_EMAIL": "ann@example.com",
                "GIT_COMMITTER_NAME": "Ann", "GIT_COMMITTER_EMAIL": "ann@example.com"})
    done = subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True,
                          text=True, timeout=60)
    return done.stdout.strip()


def _commit(repo: Path, files: dict[str, str], message: str) -> str:
    for relative, text in files.items():
        target = repo / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", message)
    return _git(repo, "rev-parse", "HEAD")


@pytest.fixture
def base(tmp_path: Path) -> Path:
    return Path(os.path.realpath(tmp_path))


@pytest.fixture
def repo(base: Path) -> Path:
    """A repository whose kb/ folder is a bundle (one concept), with an unrelated file."""
    repo = base / "source"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    _commit(repo, {"README.txt": "not the bundle\n", "kb/index.md": INDEX,
                   "kb/notes/roast.md": CONCEPT.format(title="Roast")}, "first")
    return repo


@pytest.fixture
def cache(base: Path) -> Path:
    folder = base / "cache"
    folder.mkdir()
    return folder


def _serve(mounts: RemoteMounts, argument: str) -> tuple[Dispatcher, str]:
    path = mounts.add(argument)
    return Dispatcher(ServeConfig(bundles=(path,)), remotes=mounts), path


def _ok(dispatcher: Dispatcher, tool: str, **arguments: Any) -> dict[str, Any]:
    outcome = dispatcher.call(tool, arguments)
    assert not outcome.is_error, outcome.structured
    return outcome.structured


# --------------------------------------------------------------------------------------------
# git


def test_a_git_bundle_is_served_from_the_cache_and_names_its_commit(
    repo: Path, cache: Path
) -> None:
    head = _git(repo, "rev-parse", "HEAD")
    mounts = RemoteMounts(str(cache))
    dispatcher, path = _serve(mounts, f"git+file://{repo}@main#kb")
    assert path.startswith(str(cache) + "/remote/")
    summary = _ok(dispatcher, "bundle_summary")
    assert summary["concepts"] == 1
    assert summary["source"] == {"kind": "git", "location": f"file://{repo}", "ref": "main",
                                 "subfolder": "kb", "commit": head, "archive_sha256": None}
    assert _ok(dispatcher, "read_concept", concept_id="notes/roast")["path"] == "notes/roast.md"
    # The copy is the subfolder's files only: no .git, nothing from outside kb/.
    assert sorted(p.name for p in Path(path).iterdir()) == ["index.md", "notes"]


def test_a_local_bundle_summary_has_no_source(tmp_bundle: Any) -> None:
    """A folder served in place keeps the summary's bytes: no source key at all."""
    bundle = tmp_bundle({"a.md": CONCEPT.format(title="A")})
    summary = _ok(Dispatcher(ServeConfig(bundles=(bundle,))), "bundle_summary")
    assert "source" not in summary


def test_writes_to_a_remote_bundle_are_refused_with_the_read_only_error(
    repo: Path, cache: Path
) -> None:
    dispatcher, path = _serve(RemoteMounts(str(cache)), f"git+file://{repo}#kb")
    before = sorted(str(p) for p in Path(path).rglob("*"))
    for tool, arguments in (
        ("write_concept", {"concept_id": "notes/new", "frontmatter": "type: Guide\n",
                           "body": "x\n"}),
        ("apply_concept_patch", {"concept_id": "notes/roast", "expected_revision": "0" * 64,
                                 "expected_plan_digest": "0" * 64, "operations": []}),
    ):
        outcome = dispatcher.call(tool, arguments)
        assert outcome.is_error
        if tool == "write_concept":
            assert outcome.structured["code"] == "operation_rejected"
            assert outcome.structured["message"].startswith(
                "the bundle is on a read-only file system")
    assert sorted(str(p) for p in Path(path).rglob("*")) == before
    assert not Path(path, ".bundle-mcp").exists()


def test_a_refresh_serves_the_new_commit(repo: Path, cache: Path) -> None:
    mounts = RemoteMounts(str(cache))
    dispatcher, _path = _serve(mounts, f"git+file://{repo}@main#kb")
    first = _ok(dispatcher, "bundle_summary")
    second_commit = _commit(repo, {"kb/notes/grind.md": CONCEPT.format(title="Grind")},
                            "add grind")
    # Not fetched yet: the served copy is still the first commit's.
    assert _ok(dispatcher, "bundle_summary")["source"]["commit"] == first["source"]["commit"]
    mounts.refresh()
    after = _ok(dispatcher, "bundle_summary")
    assert after["source"]["commit"] == second_commit
    assert after["concepts"] == 2
    assert after["snapshot_revision"] != first["snapshot_revision"]
    assert _ok(dispatcher, "read_concept", concept_id="notes/grind")["id"] == "notes/grind"


def test_a_commit_outside_the_subfolder_changes_the_source_not_the_files(
    repo: Path, cache: Path
) -> None:
    """The same files under a new commit: the summary (a kept answer) names the new commit."""
    mounts = RemoteMounts(str(cache))
    dispatcher, _path = _serve(mounts, f"git+file://{repo}#kb")
    first = _ok(dispatcher, "bundle_summary")
    newer = _commit(repo, {"README.txt": "still not the bundle\n"}, "readme")
    mounts.refresh()
    after = _ok(dispatcher, "bundle_summary")
    assert after["snapshot_revision"] == first["snapshot_revision"]
    assert after["source"]["commit"] == newer


def test_a_failed_refresh_keeps_serving_the_last_copy(
    repo: Path, cache: Path, caplog: pytest.LogCaptureFixture
) -> None:
    mounts = RemoteMounts(str(cache))
    dispatcher, _path = _serve(mounts, f"git+file://{repo}#kb")
    before = _ok(dispatcher, "bundle_summary")
    _commit(repo, {"kb/link.md": CONCEPT.format(title="L")}, "grow")
    os.symlink("/etc/passwd", repo / "kb" / "escape.md")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "a link out")
    mounts.refresh()
    assert "a link" in caplog.text and "still serving" in caplog.text
    assert _ok(dispatcher, "bundle_summary") == before


def test_the_history_tools_refuse_a_remote_copy(repo: Path, cache: Path) -> None:
    dispatcher, _path = _serve(RemoteMounts(str(cache)), f"git+file://{repo}#kb")
    outcome = dispatcher.call("concept_history", {"concept_id": "notes/roast"})
    assert outcome.structured["code"] == "operation_rejected"
    assert "fetched by the server" in outcome.structured["message"]


def test_a_missing_ref_or_subfolder_is_a_clear_failure(repo: Path, cache: Path) -> None:
    mounts = RemoteMounts(str(cache))
    with pytest.raises(FetchFailed, match="git fetch failed"):
        mounts.add(f"git+file://{repo}@no-such-branch")
    with pytest.raises(FetchFailed, match="no files under 'nowhere'"):
        mounts.add(f"git+file://{repo}#nowhere")


# --------------------------------------------------------------------------------------------
# the BUNDLE argument


@pytest.mark.parametrize(
    ("argument", "kind", "url", "ref", "subfolder"),
    [
        ("git+file:///srv/repo", "git", "file:///srv/repo", None, None),
        ("git+https://host/org/repo.git@v1.2#docs/kb", "git", "https://host/org/repo.git",
         "v1.2", "docs/kb"),
        ("git+ssh://git@host/org/repo@main", "git", "ssh://git@host/org/repo", "main", None),
        ("/srv/kb.tar.gz", "archive", "/srv/kb.tar.gz", None, None),
        ("https://host/kb.zip#kb", "archive", "https://host/kb.zip", None, "kb"),
    ],
)
def test_remote_arguments_parse(
    argument: str, kind: str, url: str, ref: str | None, subfolder: str | None
) -> None:
    assert is_remote(argument)
    location = parse_location(argument)
    assert (location.kind, location.url, location.ref, location.subfolder) == (
        kind, url, ref, subfolder)


@pytest.mark.parametrize(
    "argument",
    [
        "git+ext::sh -c touch% /tmp/pwned",  # the ext transport runs a command
        "git+file:///srv/repo@--upload-pack=touch",  # an option as the ref
        "git+file:///srv/repo#../outside",
        "git+relative/path",
        "ftp://host/kb.tar.gz",
    ],
)
def test_bad_remote_arguments_are_refused(argument: str) -> None:
    with pytest.raises(ValueError):
        parse_location(argument)


def test_credentials_never_reach_the_source() -> None:
    location = parse_location("git+https://user:secret@host/repo.git")
    assert location.shown == "https://host/repo.git"
    assert location.url == "https://user:secret@host/repo.git"  # git still gets them


def test_folders_are_not_remote() -> None:
    assert not is_remote("/srv/bundle") and not is_remote("docs/knowledge")


def test_a_bad_remote_bundle_is_a_usage_error_on_one_line(
    repo: Path, cache: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BUNDLE_MCP_CACHE_DIR", str(cache))
    assert cli.main(["serve", f"git+file://{repo}@no-such-branch"]) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "git fetch failed" in err


def test_remote_bundles_need_one_process_and_a_cache(
    repo: Path, cache: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BUNDLE_MCP_CACHE_DIR", str(cache))
    assert cli.main(["serve", f"git+file://{repo}#kb", "--http", "127.0.0.1:0",
                     "--workers", "2"]) == cli.EXIT_USAGE
    assert "from one process" in capsys.readouterr().err
    monkeypatch.setenv("BUNDLE_MCP_CACHE_DIR", "off")
    assert cli.main(["serve", f"git+file://{repo}#kb"]) == cli.EXIT_USAGE
    assert "cache folder" in capsys.readouterr().err


# --------------------------------------------------------------------------------------------
# archives


def _tar(path: Path, members: list[tuple[tarfile.TarInfo, bytes | None]]) -> Path:
    with tarfile.open(path, "w:gz") as archive:
        for info, data in members:
            archive.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


def _file(name: str, data: bytes) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, data


def _link(name: str, target: str, kind: bytes) -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, target
    return info, None


GOOD = [_file("kb/index.md", INDEX.encode()),
        _file("kb/notes/roast.md", CONCEPT.format(title="Roast").encode())]


def test_a_tar_gz_is_served_and_named_by_its_digest(base: Path, cache: Path) -> None:
    archive = _tar(base / "kb.tar.gz", GOOD)
    dispatcher, path = _serve(RemoteMounts(str(cache)), f"{archive}#kb")
    summary = _ok(dispatcher, "bundle_summary")
    import hashlib

    assert summary["source"]["kind"] == "archive"
    assert summary["source"]["archive_sha256"] == hashlib.sha256(archive.read_bytes()).hexdigest()
    assert summary["concepts"] == 1
    assert sorted(p.name for p in Path(path).iterdir()) == ["index.md", "notes"]


def test_a_zip_is_served(base: Path, cache: Path) -> None:
    archive = base / "kb.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as out:
        out.writestr("index.md", INDEX)
        out.writestr("notes/roast.md", CONCEPT.format(title="Roast"))
    dispatcher, _path = _serve(RemoteMounts(str(cache)), str(archive))
    assert _ok(dispatcher, "bundle_summary")["concepts"] == 1


def _outside(base: Path) -> list[str]:
    """Everything under the test folder but the cache and the archives: what an unpacker must
    never have written."""
    return sorted(str(p) for p in base.rglob("*")
                  if "cache" not in p.relative_to(base).parts[:1] and p.suffix not in (".gz",
                                                                                       ".zip"))


def _device() -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo("kb/dev")
    info.type, info.devmajor, info.devminor = tarfile.CHRTYPE, 1, 3
    return info, None


@pytest.mark.parametrize(
    ("members", "message"),
    [
        ([*GOOD, _file("kb/../../escaped.md", b"x")], "outside its folder ('..')"),
        ([*GOOD, _file("/tmp/absolute.md", b"x")], "absolute path"),
        ([*GOOD, _link("kb/escape.md", "../../../../etc/passwd", tarfile.SYMTYPE)], "a link"),
        ([*GOOD, _link("kb/hard.md", "/etc/passwd", tarfile.LNKTYPE)], "a link"),
        ([*GOOD, _device()], "a device file or FIFO"),
        ([*GOOD, _file("kb/big.md", b"x" * 5000)], "more than 4096 bytes"),
        ([*GOOD, *(_file(f"kb/n{i}.md", b"x") for i in range(4))], "more than 5 files"),
        ([*GOOD, _file("kb/index.md", b"again")], "'index.md' twice"),
    ],
    ids=["dotdot", "absolute", "symlink-out", "hardlink", "device", "oversized", "too-many",
         "twice"],
)
def test_a_hostile_tar_is_refused_and_writes_nothing_outside_the_cache(
    base: Path, cache: Path, members: list[tuple[tarfile.TarInfo, bytes | None]], message: str
) -> None:
    archive = _tar(base / "hostile.tar.gz", members)
    before = _outside(base)
    mounts = RemoteMounts(str(cache), Caps(max_files=5, max_bytes=4096))
    with pytest.raises(FetchFailed, match=message.replace("(", r"\(").replace(")", r"\)")) as exc:
        mounts.add(f"{archive}#kb")
    assert "nothing of it is served" in str(exc.value)
    assert _outside(base) == before
    assert not Path("/tmp/absolute.md").exists()
    # Nothing was swapped in, and no half-unpacked folder is left in the cache.
    (folder,) = (cache / "remote").iterdir()
    assert not (folder / "tree").exists()
    assert [p.name for p in folder.iterdir() if p.name.startswith("tree")] == []


def test_a_zip_bomb_is_refused_while_it_is_written(base: Path, cache: Path) -> None:
    """8 MiB of zeros compress to a few KiB: refused at the byte cap, counting written bytes,
    and the partial file is gone with its folder."""
    archive = base / "bomb.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as out:
        out.writestr("index.md", INDEX)
        out.writestr("zeros.md", b"\0" * (8 * 1024 * 1024))
    assert archive.stat().st_size < 64 * 1024
    mounts = RemoteMounts(str(cache), Caps(max_bytes=1024 * 1024))
    with pytest.raises(FetchFailed, match="more than 1048576 bytes"):
        mounts.add(str(archive))
    (folder,) = (cache / "remote").iterdir()
    assert sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) < 64 * 1024 * 2


def test_a_zip_with_a_symlink_or_dotdot_is_refused(base: Path, cache: Path) -> None:
    link = base / "link.zip"
    with zipfile.ZipFile(link, "w") as out:
        info = zipfile.ZipInfo("escape.md")
        info.external_attr = (0o120777 << 16)
        out.writestr(info, "/etc/passwd")
    with pytest.raises(FetchFailed, match="a link"):
        RemoteMounts(str(cache)).add(str(link))
    dotdot = base / "dotdot.zip"
    with zipfile.ZipFile(dotdot, "w") as out:
        out.writestr("../escaped.md", "x")
    with pytest.raises(FetchFailed, match=r"outside its folder"):
        RemoteMounts(str(cache)).add(str(dotdot))
    assert not (base / "escaped.md").exists() and not (cache / "escaped.md").exists()


def test_not_an_archive_is_refused(base: Path, cache: Path) -> None:
    fake = base / "fake.tar.gz"
    fake.write_bytes(gzip.compress(b"this is not a tar file at all" * 20))
    with pytest.raises(FetchFailed, match="tar"):
        RemoteMounts(str(cache)).add(str(fake))


@pytest.mark.parametrize(
    ("name", "problem"),
    [("a/../../b", "'..'"), ("/abs", "absolute"), ("C:/x", "absolute"), ("a\\b", "backslash"),
     ("x" * 256, "longer")],
)
def test_member_names_that_leave_the_folder_are_refused(name: str, problem: str) -> None:
    with pytest.raises(ArchiveRefused, match=problem):
        member_path(name, None)


def test_member_paths_below_the_subfolder() -> None:
    assert member_path("./kb/notes/a.md", "kb") == "notes/a.md"
    assert member_path("other/a.md", "kb") is None
    assert member_path("kb/", "kb") is None


# --------------------------------------------------------------------------------------------
# an archive over HTTP (a server thread of this process)


@pytest.fixture
def http_folder(base: Path) -> Iterator[tuple[str, Path]]:
    folder = base / "www"
    folder.mkdir()

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, directory=str(folder), **kwargs)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", folder
    finally:
        server.shutdown()
        server.server_close()


def test_an_archive_is_downloaded_and_refreshed(
    http_folder: tuple[str, Path], cache: Path
) -> None:
    url, folder = http_folder
    _tar(folder / "kb.tar.gz", GOOD)
    mounts = RemoteMounts(str(cache))
    dispatcher, _path = _serve(mounts, f"{url}/kb.tar.gz#kb")
    first = _ok(dispatcher, "bundle_summary")
    assert first["concepts"] == 1 and first["source"]["location"] == f"{url}/kb.tar.gz"
    _tar(folder / "kb.tar.gz", [*GOOD, _file("kb/notes/grind.md",
                                              CONCEPT.format(title="Grind").encode())])
    mounts.refresh()
    after = _ok(dispatcher, "bundle_summary")
    assert after["concepts"] == 2
    assert after["source"]["archive_sha256"] != first["source"]["archive_sha256"]


def test_a_download_past_the_cap_is_refused(http_folder: tuple[str, Path], cache: Path) -> None:
    url, folder = http_folder
    (folder / "big.tar.gz").write_bytes(os.urandom(3 * 1024 * 1024))
    with pytest.raises(FetchFailed, match="larger than"):
        RemoteMounts(str(cache), Caps(max_bytes=1024 * 1024)).add(f"{url}/big.tar.gz")
    assert not any(p.name.startswith("archive") for p in (cache / "remote").rglob("*"))


def test_an_unreachable_url_is_a_clear_failure(http_folder: tuple[str, Path], cache: Path) -> None:
    url, _folder = http_folder
    with pytest.raises(FetchFailed, match="HTTP 404"):
        RemoteMounts(str(cache)).add(f"{url}/missing.tar.gz")
