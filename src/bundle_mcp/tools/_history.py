"""What the history tools share: where the concept's file sits in its git work tree, and which
of its past paths the caller may see (docs/decisions/history-and-remote.md)."""

from __future__ import annotations

from ..errors import OPERATION_REJECTED, BundleError, recovery_step
from ..toolspec import CallContext, Runner, TextRenderer, ToolSpec
from ..vcs.history import WorkTree, work_tree
from ._common import MIB

__all__ = ["MAX_SCANNED", "bundle_relative", "history_spec", "visible", "work_tree_of"]

# The newest commits of a file that a call reads (git log --max-count): a bound on the work of
# one call however long the history.
MAX_SCANNED = 10_000


def history_spec(
    name: str, title: str, description: str, run: Runner, text: TextRenderer | None = None
) -> ToolSpec:
    """The spec of a history tool: read-only, in the ``history`` toolset, answering for a bundle
    with unparseable files too (git's past does not depend on them), within 1 MiB."""
    return ToolSpec(
        name=name,
        title=title,
        toolset="history",
        read_only=True,
        needs_parseable=False,
        output_budget=1 * MIB,
        description=description,
        run=run,
        text=text,
    )


def work_tree_of(call: CallContext) -> WorkTree:
    """The served bundle's place in its git work tree.

    Raises:
        BundleError: ``operation_rejected`` for a remote bundle (served from a copy that has
            no history) and for a bundle outside git (:func:`bundle_mcp.vcs.history.work_tree`).
    """
    if call.source is not None:
        raise BundleError(
            OPERATION_REJECTED,
            f"this bundle is served from a {call.source.kind} copy fetched by the server, which "
            "keeps no history to read",
            (recovery_step("clone the repository and serve the clone to read its history; "
                           "bundle_summary's source names the commit served"),),
        )
    return work_tree(call.bundle_path)


def bundle_relative(tree: WorkTree, repo_path: str) -> str | None:
    """The bundle-relative form of a repository path, or ``None`` when it lies outside the
    bundle's folder."""
    if not repo_path.startswith(tree.prefix):
        return None
    relative = repo_path[len(tree.prefix):]
    return relative or None


def visible(call: CallContext, tree: WorkTree, repo_path: str) -> str | None:
    """The bundle-relative path when the caller may read that file, else ``None``: outside the
    bundle, or outside the reader's read scope (the scope applies to a path as it was then)."""
    relative = bundle_relative(tree, repo_path)
    if relative is None or not call.access.read.reads_file(relative):
        return None
    return relative
