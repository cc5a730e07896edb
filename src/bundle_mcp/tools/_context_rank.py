"""Page-kind priors for ``context``'s ranking, detected from the bundle itself.

A question in a person's words ("how do I ...") is asked about how things are now; a dated
post (a release note, a blog entry) says what changed on one day, repeats the words of many
questions in passing, and may be out of date. Such posts sit together: a folder whose pages
are named after versions or dates (``blog/releases/10.23.md``, ``blog/2025-12-29-...md``).
They are found from the concept IDs alone, with no list of folder names, so a bundle that
keeps no posts is not affected; the answer stays a function of the bundle and the arguments.

Kept with the snapshot as a part of ``context``'s index slot (:data:`._context_index.CONTEXT_INDEX`,
part ``dated``): computed once per snapshot from its IDs, in time linear in their number.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..cancel import CancelToken
from ..derived import of_snapshot
from ..model import Snapshot
from ._context_index import CONTEXT_INDEX

# A folder holds dated posts when at least DATED_MIN_PAGES pages lie directly in it and at
# least DATED_MIN_SHARE of them are named starting with a digit (a version, a date).
DATED_MIN_PAGES = 5
DATED_MIN_SHARE = 0.8


def dated_folders(concept_ids: Iterable[str]) -> frozenset[str]:
    """The folders whose direct pages are mostly named after a version or a date."""
    pages: dict[str, int] = {}
    dated: dict[str, int] = {}
    for cid in concept_ids:
        folder, _, name = cid.rpartition("/")
        pages[folder] = pages.get(folder, 0) + 1
        if name[:1].isdigit():
            dated[folder] = dated.get(folder, 0) + 1
    return frozenset(
        folder for folder, count in pages.items()
        if count >= DATED_MIN_PAGES and dated.get(folder, 0) >= DATED_MIN_SHARE * count
    )


def dated_pages(snapshot: Snapshot, token: CancelToken) -> frozenset[str]:
    """The concepts that lie directly in a folder of dated posts (:func:`dated_folders`)."""

    def build() -> frozenset[str]:
        folders = dated_folders(snapshot.concepts)
        return frozenset(cid for cid in snapshot.concepts if cid.rpartition("/")[0] in folders)

    found: frozenset[str] = of_snapshot(snapshot, CONTEXT_INDEX, build, "dated",
                                        check=token.check)
    return found

