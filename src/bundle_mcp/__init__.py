"""bundle-mcp: serve and validate Open Knowledge Format bundles over the Model Context Protocol.

The public Python API is what ``__all__`` lists: run any tool through a :class:`Dispatcher` (the
same pipeline the MCP server and ``bundle-mcp call`` use), load a bundle into a frozen
:class:`Snapshot`, and read failures as :class:`BundleError` envelopes. Everything else is
internal and may change between releases (docs/ARCHITECTURE.md).
"""

from ._version import __version__
from .cancel import CancelToken
from .dispatch import Dispatcher, Outcome, ServeConfig, ServedTool, UnknownTool
from .errors import BundleError, Diagnostic
from .limits import Caps
from .loader import load_bundle
from .model import Document, Snapshot
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
