"""Readers: who may read and write which folders, and the bearer tokens that pick them.

``serve --readers FILE`` reads a TOML or YAML file (docs/READERS.md) checked against
``contracts/readers.schema.json`` and then against the rules no schema can say (folder
patterns, unique names, a token that picks one reader only). Every error names the file and the
line it is on. Tokens are kept as their SHA-256 only: the file never holds a secret, and the
token a request presents is hashed and compared against every reader's hashes in constant time
for each, so neither a match nor its position shows in the time taken.

Without a readers file there is one reader, :data:`ALL_READER`, which reads and writes
everything: today's behaviour of ``--token`` alone and of stdio.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import re
import secrets
import threading
import tomllib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import BundleMcpError
from .okf.scopes import EVERYTHING, FULL_ACCESS, NOTHING, Access, FolderScope

__all__ = [
    "ALL_READER",
    "READER_STATE_KEY",
    "Reader",
    "ReaderBook",
    "Readers",
    "ReadersFileError",
    "hash_token",
    "load_readers",
    "new_token",
    "reader_in",
]

log = logging.getLogger(__name__)

SCHEMA_FILE = "readers.schema.json"
# Where the HTTP bearer middleware leaves the authenticated reader: the ASGI scope's "state",
# which Starlette's Request.state (and so the SDK's request context) reads.
READER_STATE_KEY = "bundle_mcp.reader"
MAX_FILE_BYTES = 1024 * 1024
TOKEN_PREFIX = "sha256:"


class ReadersFileError(BundleMcpError, ValueError):
    """The readers file cannot be used; the message names the file, the line and the fix."""


@dataclass(frozen=True)
class Reader:
    """One reader: its name (for logs and ``--reader``), what it may touch, its token hashes."""

    name: str
    access: Access
    token_hashes: frozenset[str] = frozenset()


ALL_READER = Reader("all", FULL_ACCESS)


def reader_in(scope: Mapping[str, Any]) -> Reader | None:
    """The reader the bearer middleware left in an ASGI ``scope``, or ``None`` (no middleware
    ran: stdio, or HTTP without a token, where the dispatcher's configured reader applies)."""
    state = scope.get("state")
    reader = state.get(READER_STATE_KEY) if isinstance(state, dict) else None
    return reader if isinstance(reader, Reader) else None


def hash_token(token: bytes | str) -> str:
    """The form a readers file stores a bearer token in: ``sha256:`` and 64 hex digits."""
    data = token.encode("utf-8", "surrogateescape") if isinstance(token, str) else token
    return TOKEN_PREFIX + hashlib.sha256(data).hexdigest()


def new_token() -> str:
    """A fresh bearer token: 32 random bytes, URL-safe base64 (43 printable ASCII characters)."""
    return secrets.token_urlsafe(32)


@dataclass(frozen=True)
class Readers:
    """The readers of one file, in file order."""

    source: str  # the file they came from ("" for the built-in single reader)
    readers: tuple[Reader, ...]

    def named(self, name: str) -> Reader | None:
        return next((r for r in self.readers if r.name == name), None)

    def by_token(self, presented: bytes) -> Reader | None:
        """The reader whose token this is, or ``None``. Every stored hash is compared, each in
        constant time, whatever matches first."""
        digest = hash_token(presented).encode("ascii")
        found = None
        for reader in self.readers:
            for stored in reader.token_hashes:
                if hmac.compare_digest(stored.encode("ascii"), digest):
                    found = reader
        return found


def load_readers(path: str | Path) -> Readers:
    """Read and check a readers file (TOML when it ends in ``.toml``, YAML otherwise).

    Raises:
        ReadersFileError: unreadable, malformed, not what the schema says, or breaking a rule
            (the message says which, at which line).
    """
    file = Path(path)
    try:
        raw = file.read_bytes()
    except OSError as exc:
        raise ReadersFileError(f"{file}: cannot be read: {exc.strerror or exc}") from None
    if len(raw) > MAX_FILE_BYTES:
        raise ReadersFileError(f"{file}: larger than {MAX_FILE_BYTES} bytes")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ReadersFileError(f"{file}: not UTF-8 (byte {exc.start})") from None
    toml = file.suffix.lower() == ".toml"
    document = _parse_toml(file, text) if toml else _parse_yaml(file, text)
    locate = _TomlLines(text) if toml else _YamlLines(text)
    _check_schema(file, document, locate)
    return _readers(file, document, locate)


class ReaderBook:
    """The readers in force, reloadable (SIGHUP) without a restart.

    A reload that fails keeps the readers in force and logs why: a typo in the file must not
    lock every team out, nor let anyone in.
    """

    def __init__(self, readers: Readers) -> None:
        self._lock = threading.Lock()
        self._readers = readers

    def current(self) -> Readers:
        with self._lock:
            return self._readers

    def reload(self, *, only_if_changed: bool = False) -> bool:
        """Read the file again; ``True`` when the new readers are in force. ``only_if_changed``:
        keep the readers in force (and say nothing) when the file still says the same."""
        source = self.current().source
        if not source:
            return False
        try:
            fresh = load_readers(source)
        except ReadersFileError as exc:
            log.error("readers file not reloaded, the previous readers stay in force: %s", exc)
            return False
        with self._lock:
            if only_if_changed and fresh == self._readers:
                return False
            self._readers = fresh
        log.warning("readers reloaded from %s: %s", source,
                    ", ".join(r.name for r in fresh.readers))
        return True


# -------------------------------------------------------------------------------- parsing


def _parse_toml(file: Path, text: str) -> Any:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ReadersFileError(f"{file}: not valid TOML: {exc}") from None


def _parse_yaml(file: Path, text: str) -> Any:
    import yaml  # only a YAML readers file needs it; `serve` answers initialize without it

    try:
        # The safe loader, and no aliases at all: a readers file has no use for them, and an
        # alias bomb must not cost the server its start-up.
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(event, yaml.AliasEvent):
                line = event.start_mark.line + 1 if event.start_mark else 0
                raise ReadersFileError(f"{file}:{line}: YAML aliases are not allowed here")
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ReadersFileError(f"{file}{where}: not valid YAML: {problem}") from None


def _check_schema(file: Path, document: Any, locate: _Lines) -> None:
    # Imported here: the contracts package and jsonschema are most of a second to import, and
    # `serve` imports this module before it answers initialize.
    import jsonschema

    from .contracts import contracts_dir

    schema = json.loads((contracts_dir() / SCHEMA_FILE).read_text(encoding="utf-8"))
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(document), key=lambda e: list(map(str, e.path)))
    if errors:
        error = errors[0]
        where = locate.line(tuple(error.path))
        field = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.path)
        raise ReadersFileError(
            f"{file}:{where}: {field.lstrip('.') or 'the file'}: {error.message}"
            + (f" (and {len(errors) - 1} more)" if len(errors) > 1 else "")
        )


def _readers(file: Path, document: Mapping[str, Any], locate: _Lines) -> Readers:
    readers: list[Reader] = []
    owners: dict[str, str] = {}
    for n, entry in enumerate(document["readers"]):
        name = entry["name"]
        if any(r.name == name for r in readers):
            raise ReadersFileError(
                f"{file}:{locate.line(('readers', n, 'name'))}: a second reader named {name!r}")
        read = _scope(file, locate, n, "read", entry["read"])
        writable = entry.get("write") or []
        write = _scope(file, locate, n, "write", writable) if writable else NOTHING
        hashes = frozenset(entry.get("tokens", []))
        for k, token_hash in enumerate(entry.get("tokens", [])):
            other = owners.get(token_hash)
            if other is not None:
                raise ReadersFileError(
                    f"{file}:{locate.line(('readers', n, 'tokens', k))}: this token hash "
                    f"already picks reader {other!r}; a token picks one reader only")
            owners[token_hash] = name
        readers.append(Reader(name, Access(read, write), hashes))
    return Readers(str(file), tuple(readers))


def _scope(
    file: Path, locate: _Lines, n: int, key: str, patterns: Sequence[str]
) -> FolderScope:
    for k, pattern in enumerate(patterns):
        try:
            FolderScope.of([pattern])
        except ValueError as exc:
            raise ReadersFileError(
                f"{file}:{locate.line(('readers', n, key, k))}: readers[{n}].{key}[{k}]: {exc}"
            ) from None
    scope = FolderScope.of(list(patterns))
    return EVERYTHING if scope.everything else scope


# ------------------------------------------------------------------------- line numbers


class _Lines:
    def line(self, path: tuple[Any, ...]) -> int:
        raise NotImplementedError


class _YamlLines(_Lines):
    """Lines from the YAML node tree: exact for every mapping key and sequence item."""

    def __init__(self, text: str) -> None:
        import yaml

        self._root = yaml.compose(text, Loader=yaml.SafeLoader)

    def line(self, path: tuple[Any, ...]) -> int:
        import yaml

        node = self._root
        if node is None:
            return 1
        found = node.start_mark.line + 1
        for step in path:
            child = None
            if isinstance(node, yaml.MappingNode):
                child = next((v for k, v in node.value if k.value == step), None)
            elif isinstance(node, yaml.SequenceNode) and isinstance(step, int):
                child = node.value[step] if step < len(node.value) else None
            if child is None:
                break
            node = child
            found = node.start_mark.line + 1
        return found


class _TomlLines(_Lines):
    """Lines for TOML, which ``tomllib`` does not report: the n-th ``[[readers]]`` table, then
    the line of the key inside it, then the n-th item if the array spans lines."""

    _TABLE = re.compile(r"^\s*\[\[\s*readers\s*\]\]\s*(#.*)?$")

    def __init__(self, text: str) -> None:
        self._lines = text.splitlines()

    def line(self, path: tuple[Any, ...]) -> int:
        if len(path) < 2 or path[0] != "readers" or not isinstance(path[1], int):
            return 1
        tables = [i for i, text in enumerate(self._lines) if self._TABLE.match(text)]
        if path[1] >= len(tables):
            return 1
        start = tables[path[1]]
        end = tables[path[1] + 1] if path[1] + 1 < len(tables) else len(self._lines)
        if len(path) < 3:
            return start + 1
        key = re.compile(rf"^\s*{re.escape(str(path[2]))}\s*=")
        at = next((i for i in range(start, end) if key.match(self._lines[i])), None)
        if at is None:
            return start + 1
        if len(path) >= 4 and isinstance(path[3], int):
            items = list(self._items(at, end))
            if path[3] < len(items) and items[path[3]] != at:
                return items[path[3]] + 1
        return at + 1

    def _items(self, at: int, end: int) -> Iterator[int]:
        """The line of each string item of the array that starts at line ``at``."""
        for i in range(at, end):
            text = self._lines[i].split("#", 1)[0] if i != at else self._lines[i].split("=", 1)[1]
            for _ in re.finditer(r'"(?:[^"\\]|\\.)*"|\'[^\']*\'', text):
                yield i
            if "]" in text:
                return
