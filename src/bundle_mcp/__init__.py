"""bundle-mcp: serve and validate Open Knowledge Format bundles over the Model Context Protocol.

The public Python API is what ``__all__`` lists: run any tool through a :class:`Dispatcher` (the
same pipeline the MCP server and ``bundle-mcp call`` use), load a bundle into a frozen
:class:`Snapshot`, and read failures as :class:`BundleError` envelopes. Everything else is
internal and may change between releases (docs/ARCHITECTURE.md).

The names are imported on first use (PEP 562): ``bundle-mcp serve`` runs this file before
anything else, and the dispatcher's modules (the contracts' validators, the Markdown and YAML
parsers, every tool) are most of a second to import, which the answer to ``initialize`` must
not wait for (docs/decisions/performance.md).
"""

import importlib as _importlib
import typing as _typing

from ._version import __version__

if _typing.TYPE_CHECKING:
    from .cancel import CancelToken
    from .dispatch import Dispatcher, Outcome, ServedTool, UnknownTool
    from .errors import BundleError, Diagnostic
    from .limits import Caps
    from .loader import load_bundle
    from .model import Document, Snapshot
    from .serve_config import ServeConfig
    from .toolspec import CallContext, ToolSpec

__all__ = [
    "BundleError",
    "CallContext",
    "CancelToken",
    "Caps",
    "Diagnostic",
    "Dispatcher",
    "Document",
    "Outcome",
    "ServeConfig",
    "ServedTool",
    "Snapshot",
    "ToolSpec",
    "UnknownTool",
    "__version__",
    "load_bundle",
]

# Where each public name lives: one line per name, read by __getattr__.
_HOME = {
    "BundleError": ".errors",
    "CallContext": ".toolspec",
    "CancelToken": ".cancel",
    "Caps": ".limits",
    "Diagnostic": ".errors",
    "Dispatcher": ".dispatch",
    "Document": ".model",
    "Outcome": ".dispatch",
    "ServeConfig": ".serve_config",
    "ServedTool": ".dispatch",
    "Snapshot": ".model",
    "ToolSpec": ".toolspec",
    "UnknownTool": ".dispatch",
    "load_bundle": ".loader",
}


def __getattr__(name: str) -> object:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(_importlib.import_module(home, __name__), name)
    globals()[name] = value  # the next lookup is an ordinary attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
