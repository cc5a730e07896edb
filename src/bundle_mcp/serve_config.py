"""What the operator decided at start-up (:class:`ServeConfig`), apart from the dispatcher.

Its own module, with nothing heavy beneath it: ``bundle-mcp serve`` builds and checks it before
it answers ``initialize``, and the dispatcher's modules are imported only after that answer.
:mod:`bundle_mcp.dispatch` re-exports it.
"""

from __future__ import annotations

from dataclasses import dataclass

from .limits import DEFAULT_CAPS, Caps
from .readers import ALL_READER, Reader

__all__ = ["ServeConfig"]


@dataclass(frozen=True)
class ServeConfig:
    """What the operator decided at start-up: which bundles may be read and which tools served."""

    bundles: tuple[str, ...] = ()  # allow-list of absolute clean bundle paths from the command line
    allow_any_bundle: bool = False  # reference behaviour: any absolute bundle_path
    skip_unparseable: bool = False
    read_only: bool = False  # leave out the tools that change the bundle (read_only=False)
    toolsets: frozenset[str] | None = None  # serve only these (toolspec.TOOLSETS); None: all
    # Who a call is made by when the transport names no reader: stdio's --reader, else all.
    reader: Reader = ALL_READER
    # The loader's caps (--max-files, --max-bytes): what loads, what a write may reach, and the
    # bounds of the contracts that are the file cap (contracts/files.py).
    caps: Caps = DEFAULT_CAPS

    def scopes_problem(self) -> str | None:
        """Why readers' folder scopes cannot hold with these bundles, or ``None`` when they can.

        A scope is a set of folders relative to a bundle's root. If a call could name a folder
        inside a served bundle as its bundle (any path under ``--allow-any-bundle``, or a second
        BUNDLE inside the first), that folder's files would be the root files of a bundle of
        their own, and every scope would be matched against the wrong paths. So a readers file
        is served only with BUNDLE arguments none of which lies inside another.
        """
        if self.allow_any_bundle:
            return ("--readers and --allow-any-bundle exclude each other: reader scopes are "
                    "folders of the served bundles; name each bundle as a BUNDLE argument")
        for outer in self.bundles:
            for inner in self.bundles:
                if inner.startswith(outer.rstrip("/") + "/"):
                    return (f"with --readers no BUNDLE may lie inside another ({inner} is "
                            f"inside {outer}): a reader could name the inner one and step out "
                            "of its scopes; serve them from separate servers")
        return None
