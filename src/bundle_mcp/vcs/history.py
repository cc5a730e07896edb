"""What git knows of one file of a work tree: the commits that touched it, following renames,
and its diff between two commits (or a commit and the work tree).

Paths here are repository-relative (``/``-separated); :class:`WorkTree` says where the folder
asked about sits in its repository, so a caller can turn them into paths below that folder.
Every refusal is ``operation_rejected`` with a reason that names no host path (git's own
messages can, so they stay in the server log).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from ..errors import (
    BundleError,
    invalid_input,
    invalid_request,
    operation_rejected,
)
from . import git

__all__ = ["Commit", "FileDiff", "WorkTree", "file_diff", "file_log", "resolve", "work_tree"]

log = logging.getLogger(__name__)

_HEX = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")
_HEADER = "\x1e"
# One commit: a record separator, then hash, author date (strict ISO 8601), author name and
# subject, NUL-separated (none of them can hold a NUL); then, with -z --name-only, the file's
# path in that commit, NUL-terminated.
_LOG_FORMAT = f"--format={_HEADER}%H%x00%aI%x00%an%x00%s"


@dataclass(frozen=True, slots=True)
class WorkTree:
    """A folder inside a git work tree: the tree's top and the folder's prefix in it."""

    folder: str  # the folder asked about (absolute)
    prefix: str  # its path in the repository, '' at the top, else ending in '/'


@dataclass(frozen=True, slots=True)
class Commit:
    commit: str
    date: str  # author date, ISO 8601 with offset
    author: str  # author name
    subject: str
    path: str  # the file's repository-relative path in this commit


@dataclass(frozen=True, slots=True)
class FileDiff:
    text: str  # the unified diff (git's own text, UTF-8 with replacement characters)
    paths: tuple[str, ...]  # every repository-relative path the diff names (old and new)


def rejected(message: str, step: str) -> BundleError:
    return operation_rejected(message, step=step)


NOT_IN_GIT_STEP = (
    "history needs a bundle inside a git work tree (a clone with its .git); serve the bundle "
    "from its repository, or read the current files with read_concept"
)


def work_tree(folder: str) -> WorkTree:
    """Where ``folder`` sits in its git work tree.

    Raises:
        BundleError: ``operation_rejected`` when git is missing, the folder is in no work tree
            (or in a bare repository), or git refuses the repository (another owner).
    """
    try:
        done = git.run(["rev-parse", "--is-inside-work-tree", "--show-prefix"], cwd=folder,
                       max_output=64 * 1024)
    except git.GitMissing:
        raise rejected("the git command is not installed on the server, so the bundle's "
                       "history cannot be read", NOT_IN_GIT_STEP) from None
    except git.GitFailed as exc:
        raise rejected(f"git did not answer: {exc.message}", "retry later") from None
    lines = done.stdout.decode("utf-8", "replace").splitlines()
    if done.returncode != 0 or not lines or lines[0] != "true":
        if done.stderr:
            log.info("git rev-parse in a served bundle: %s", done.stderr)
        if "dubious ownership" in done.stderr:
            raise rejected(
                "git refuses to read the bundle's repository: it belongs to another user",
                "the operator adds the repository to git's safe.directory setting",
            )
        raise rejected("the bundle is not inside a git work tree, so it has no history to read",
                       NOT_IN_GIT_STEP)
    prefix = lines[1] if len(lines) > 1 else ""
    return WorkTree(folder=folder, prefix=prefix)


def resolve(tree: WorkTree, revision: str, field: str) -> str:
    """The full hash of the commit ``revision`` names.

    Raises:
        BundleError: ``invalid_request`` for a value that is not a revision (an option, a
            range); ``operation_rejected`` when the repository has no such commit.
    """
    problem = git.revision_problem(revision)
    if problem is not None:
        raise invalid_request(
            f"{field.removeprefix('$.')} is not a revision: {problem}",
            invalid_input(field, problem),
        )
    done = _run(tree, ["rev-parse", "--verify", "--quiet", "--end-of-options",
                       f"{revision}^{{commit}}"])
    found = done.stdout.decode("ascii", "replace").strip()
    if done.returncode != 0 or not _HEX.fullmatch(found):
        raise rejected(
            f"the repository has no commit {revision!r} ({field.removeprefix('$.')})",
            "name a commit, branch or tag of the bundle's repository: concept_history lists "
            "the commits that touched the concept",
        )
    return found


def file_log(tree: WorkTree, path: str, max_commits: int) -> tuple[list[Commit], bool]:
    """The commits that touched the file at repository path ``path`` (as it is named at HEAD),
    following renames, newest first: at most ``max_commits``, and whether that was all."""
    done = _run(tree, ["log", "--follow", "-z", "--name-only", "--no-color", _LOG_FORMAT,
                       f"--max-count={max_commits + 1}", "HEAD", "--", f":(top,literal){path}"],
)
    if done.returncode != 0:
        # An empty repository (no HEAD yet) has no history, not an error.
        if "does not have any commits" in done.stderr or "bad revision 'HEAD'" in done.stderr:
            return [], True
        log.info("git log in a served bundle: %s", done.stderr)
        raise rejected("git could not list the file's history", "retry later")
    commits: list[Commit] = []
    tokens = done.stdout.decode("utf-8", "replace").split("\x00")
    index = 0
    while index < len(tokens):
        token = tokens[index]
        if token.startswith(_HEADER) and index + 3 < len(tokens):
            commit = token[len(_HEADER):]
            date, author, subject = tokens[index + 1 : index + 4]
            index += 4
            paths = []
            while index < len(tokens) and not tokens[index].startswith(_HEADER):
                name = tokens[index].lstrip("\n")
                if name:
                    paths.append(name)
                index += 1
            # A commit lists the file under its name in that commit; a merge that only
            # followed it along lists none: the name stays the one of the commit after it.
            shown = paths[-1] if paths else (commits[-1].path if commits else path)
            commits.append(Commit(commit, date, author, subject, shown))
        else:
            index += 1
    complete = len(commits) <= max_commits
    return commits[:max_commits], complete


def file_diff(
    tree: WorkTree, start: str, end: str | None, paths: tuple[str, ...], max_bytes: int
) -> FileDiff | None:
    """The unified diff of the files at ``paths`` (the names one file has had) from commit
    ``start`` to commit ``end`` (``None``: the work tree), renames detected; ``None`` when it
    is longer than ``max_bytes``."""
    between = [start] if end is None else [start, end]
    pathspecs = ["--", *(f":(top,literal){p}" for p in paths)]
    common = ["diff", "--no-color", "--no-ext-diff", "--no-textconv", "-M"]
    # The names first (NUL-separated, so any file name survives), then the text.
    names = _run(tree, [*common, "--name-status", "-z", "--end-of-options", *between,
                        *pathspecs])
    _check(names)
    named: list[str] = []
    for token in names.stdout.decode("utf-8", "replace").split("\x00"):
        # Status tokens are a letter and an optional score (M, A, D, R100); the rest are paths.
        if token and not re.fullmatch(r"[A-Z][0-9]*", token) and token not in named:
            named.append(token)
    # --relative: the text names paths below the bundle, as `paths` does.
    done = _run(tree, [*common, "--relative", "--end-of-options", *between, *pathspecs],
                max_output=max_bytes)
    if done.overflow:
        return None
    _check(done)
    return FileDiff(done.stdout.decode("utf-8", "replace"), tuple(named))


def _check(done: git.GitResult) -> None:
    if done.returncode != 0:
        log.info("git diff in a served bundle: %s", done.stderr)
        raise rejected("git could not compute the diff", "retry later")


def _run(
    tree: WorkTree, args: list[str], *, max_output: int = 16 * 1024 * 1024
) -> git.GitResult:
    try:
        return git.run(args, cwd=tree.folder, max_output=max_output)
    except git.GitMissing:
        raise rejected("the git command is not installed on the server", NOT_IN_GIT_STEP) from None
    except git.GitFailed as exc:
        raise rejected(f"git did not answer: {exc.message}", "retry later") from None
