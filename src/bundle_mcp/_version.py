"""The release version, in a module of its own so every layer can name it without importing the
package's public API."""

__version__ = "0.1.0"
