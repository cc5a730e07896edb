"""The publication layer every write tool uses: compare-and-swap, atomic, journaled, replayable.

See :mod:`.publish` for the protocol and :mod:`.journal` for the durable state it keeps under the
bundle's ``.bundle-mcp/`` dot-folder (which the loader skips).
"""

from __future__ import annotations

from .journal import recover
from .publish import PlannedWrite, Receipt, apply_writes

__all__ = ["PlannedWrite", "Receipt", "apply_writes", "recover"]
