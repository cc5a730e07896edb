"""The file-system layer under loading and writing: everything both need from the disk.

- :mod:`.refusals`: a refused file-system call as ``operation_rejected``, never naming a host path;
- :mod:`.handles`: the pinned bundle root and directory handles opened without following a
  symlink, plus the small I/O both sides use (read, write, fsync);
- :mod:`.state_dir`: the ``.bundle-mcp/`` dot-folder and its atomically replaced JSON files;
- :mod:`.locks`: the bundle's write lock (exclusive for an apply, shared for a reader);
- :mod:`.journal`: the format of the journal of the one apply in flight, and the names of the
  dot-files it keeps beside each target;
- :mod:`.receipts`: the durable outcome of each finished apply, so an identical one replays;
- :mod:`.recovery`: finishing or undoing an interrupted apply.

The loader reads through these and the write path publishes through them; neither is imported
here: this package depends only on :mod:`bundle_mcp.errors`, :mod:`bundle_mcp.cancel` and the
standard library.
"""
