"""bundle-mcp: serve and validate Open Knowledge Format bundles over the Model Context Protocol."""

__version__ = "0.1.0"
