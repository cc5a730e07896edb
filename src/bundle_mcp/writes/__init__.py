"""The publication layer every write tool uses: compare-and-swap, atomic, journaled, replayable.

See :mod:`.publish` for the protocol; the durable state it keeps under the bundle's
``.bundle-mcp/`` dot-folder (which the loader skips), the locks and the recovery of an
interrupted apply live in :mod:`bundle_mcp.storage`, below both this package and the loader.
"""

from __future__ import annotations

from .publish import PlannedWrite, Receipt, apply_writes

__all__ = ["PlannedWrite", "Receipt", "apply_writes"]
