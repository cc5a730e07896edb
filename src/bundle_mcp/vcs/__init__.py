"""Reading git: the one way bundle-mcp runs the ``git`` command (:mod:`.git`) and what it asks
of it (:mod:`.history`: a file's commits and diffs). Knows nothing of OKF: paths in, paths out.
Imports only the foundation."""
