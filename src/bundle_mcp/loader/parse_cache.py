"""A persistent parse cache, so a restarted server does not parse every file again.

One SQLite database per bundle path lives outside the bundle, in the user's cache directory
(``$BUNDLE_MCP_CACHE_DIR``, else ``$XDG_CACHE_HOME/bundle-mcp``, else ``~/.cache/bundle-mcp``;
``BUNDLE_MCP_CACHE_DIR=off`` disables it), under ``parse/``. It is the first layer of the
embedded index (docs/DECISIONS.md, "The parse cache is an embedded SQLite index"):

- Rows are content-addressed: a document's row is keyed by its path and the SHA-256 of its
  bytes and never changes once written; its Markdown facts, computed later than its frontmatter,
  are a second row with the same key. A save inserts only the rows the database lacks, so one
  edited file costs one row, not a rewrite of the bundle's cache.
- A save also keeps each file's *settled* stat (``capture.StatKey``) beside the SHA-256 of the
  bytes captured with it, in the one table keyed by path alone: the next process's walk takes a
  file with that stat to hold those bytes without reading it, and reads them when it builds the
  document (``loader.build_snapshot``), checking the hash.
- A save also deletes the rows of files the saved snapshot no longer has, in the same
  transaction, so the database holds one bundle's current files (and, for a moment, those of a
  second process that saw another revision: a cache miss at worst).
- WAL mode and a busy timeout let the ``--workers`` processes and two servers of one user share
  one database; every write is one transaction.
- Every section's words are kept in an FTS5 table of the same database (``section_rows``),
  written by the warm-up after its save, so search_sections counts a new term without reading
  the documents.
- It is a cache, never the truth. An entry is used only when its path and the SHA-256 of the
  file's current bytes match and it decodes into exactly the expected shapes. A database that
  is corrupt, foreign (another format or bundle) or unwritable (a full disk, a read-only mount)
  is ignored, the files are parsed, and a corrupt or foreign one is replaced at the next save.
  JSON text in SQLite, never pickle: a cache file is data, and loading it must not run code.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import hashlib
import itertools
import json
import logging
import operator
import os
import sqlite3
import struct
import sys
import threading
import time
import weakref
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import zstd_frames
from .._version import __version__
from ..derived import kept_values
from ..errors import Diagnostic, FileMoved
from ..model import (
    Document,
    Documents,
    Edge,
    FileRecord,
    FormatRules,
    KeptEdgeColumns,
    KeptSectionWords,
    Relation,
    SectionRows,
    Unfrozen,
    thaw,
)
from ..packed_text import PackedText
from . import section_rows
from .capture import StatKey
from .document import OKF_RULES, Hold, document_rules
from .facts_codec import (
    PackedFacts,
    as_int,
    as_opt_str,
    as_str,
    interned_or_none,
    interned_str,
    spans_fit,
)
from .frontmatter import DELIMITER_LINE
from .text import BOM, count_breaks, count_lines

log = logging.getLogger(__name__)

# 4: SQLite rows instead of one JSON pack per bundle.
# 5: each document row also says whether the file parses (``error``), apart from its entry.
# 8: a ``stats`` table: the settled stat of each file, trusted by the next process's walk; a
#    ``targets`` table: the concepts each file's links and relations name; a ``derived`` table:
#    the document structures whose slots have a codec, as compressed JSON. (6 and 7 were
#    steps of the same change that no release wrote.)
# 9: a ``parts`` table: what a tool computed for one query term over a whole snapshot (context's
#    stem parts of the scores, search_sections' postings), keyed by the snapshot's revision.
# 10: ``derived`` and ``parts`` values compressed with Zstandard (``zstd_frames``), not zlib.
# 11: a ``spans`` column beside ``facts``: the sections' line spans (facts_codec.spans_bytes);
#     ``facts`` as a document holds them (facts_codec.packed_facts: compressed past a length).
FORMAT = "bundle-mcp-parse-cache/11"
MAX_PACKS = 32  # databases kept in the folder, newest first (one per bundle path)
# Rows of the ``parts`` table kept per database, the newest first: a common stem's part of
# context's scores is a few hundred KB at 10,000 concepts, a rare one's a few hundred bytes.
MAX_PARTS = 256
# Parts kept while their bundle's database does not exist yet, held until a save makes it.
MAX_WAITING_PARTS = 64
SUFFIX = ".sqlite3"
# How long a save or a load waits for another process's write transaction to end.
BUSY_TIMEOUT_MS = 5_000
# How long a writer that is done waits for readers to let it empty the write-ahead log
# (_truncate_log), and the log's size kept after a checkpoint resets it.
CHECKPOINT_WAIT_MS = 200
WAL_KEPT_BYTES = 4 * 1024 * 1024
_DISABLED = ("off", "none", "0", "false")
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID",
    # ``error``: the parse error as JSON, NULL when the file parses: what a load needs of
    # every file at once, read without decoding any entry.
    "CREATE TABLE IF NOT EXISTS documents(path TEXT NOT NULL, sha256 TEXT NOT NULL,"
    " size INTEGER NOT NULL, error TEXT, entry TEXT NOT NULL,"
    " PRIMARY KEY (path, sha256)) WITHOUT ROWID",
    # ``spans``: the sections' line spans as bytes, so a restarted server names a document's
    # sections (a walk's locators, its section count) without decoding ``facts``.
    "CREATE TABLE IF NOT EXISTS facts(path TEXT NOT NULL, sha256 TEXT NOT NULL,"
    " facts BLOB NOT NULL, spans BLOB NOT NULL, PRIMARY KEY (path, sha256)) WITHOUT ROWID",
    # The one table keyed by path alone, so its rows change: the stat a file had when its
    # bytes had the SHA-256 beside it, written only for settled stats (capture.StatKey).
    "CREATE TABLE IF NOT EXISTS stats(path TEXT PRIMARY KEY, sha256 TEXT NOT NULL,"
    " dev INTEGER NOT NULL, ino INTEGER NOT NULL, size INTEGER NOT NULL,"
    " mtime_ns INTEGER NOT NULL, ctime_ns INTEGER NOT NULL) WITHOUT ROWID",
    # The concept IDs a document's links and relations name, written with its ``facts`` row
    # (so a file with facts has all its targets here): which files may hold an edge into a
    # concept, without building every document (model.InboundHint).
    "CREATE TABLE IF NOT EXISTS targets(target TEXT NOT NULL, path TEXT NOT NULL,"
    " sha256 TEXT NOT NULL, PRIMARY KEY (target, path, sha256)) WITHOUT ROWID",
    # The derived structures of a document that their slots keep (derived.Codec), by the
    # slot's key: a restarted server reads them back instead of building them.
    "CREATE TABLE IF NOT EXISTS derived(path TEXT NOT NULL, sha256 TEXT NOT NULL,"
    " key TEXT NOT NULL, value BLOB NOT NULL, PRIMARY KEY (path, sha256, key)) WITHOUT ROWID",
    # What a tool computed for one query term over a whole snapshot, keyed by the revision
    # (the hash of every file's bytes, so a row never changes once written) and the part's
    # key: a restarted server reads a term's part back instead of searching every document
    # for it. A rowid table: the newest rows are kept (MAX_PARTS), the oldest dropped.
    "CREATE TABLE IF NOT EXISTS parts(revision TEXT NOT NULL, key TEXT NOT NULL,"
    " value BLOB NOT NULL, PRIMARY KEY (revision, key))",
    # The documents whose sections' words are in the ``section_words`` FTS5 table
    # (``section_rows``, which makes that table when it first writes), numbered once ever.
    "CREATE TABLE IF NOT EXISTS section_docs(doc INTEGER PRIMARY KEY AUTOINCREMENT,"
    " path TEXT NOT NULL, sha256 TEXT NOT NULL, sections INTEGER NOT NULL,"
    " UNIQUE (path, sha256))",
)
_TABLES = ("meta", "documents", "facts", "stats", "targets", "derived", "parts", "section_docs")


def default_directory() -> Path | None:
    configured = os.environ.get("BUNDLE_MCP_CACHE_DIR")
    if configured is not None:
        return None if configured.strip().lower() in _DISABLED else Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "bundle-mcp"


class ParseCache:
    """Reads and writes the database of one bundle; every failure degrades to "not cached"."""

    def __init__(self, directory: Path | None) -> None:
        self._directory = directory / "parse" if directory is not None else None
        self._warned = False  # a cache that cannot be written is logged once
        self._warned_lock = threading.Lock()
        # The writes of kept parts still running (each in a thread of its own: a call that
        # computed a part does not wait for the disk, nor for another process's save).
        self._part_writes: list[threading.Thread] = []
        self._one_part = threading.Lock()  # held by a part's write (KeptParts._write)
        # Parts kept before their bundle's database existed (a first warm-up keeps its answers
        # before its save makes the database): written once a save has made it.
        self._waiting_parts: dict[Path, list[Callable[[], None]]] = {}
        # One per database, held while this process saves it: a part write that met the
        # database locked waits for the save under way before it tries again.
        self._save_locks: dict[Path, threading.Lock] = {}
        # One kept read connection per database for the parts rows (KeptParts.read): opening
        # one cost about 2 ms, paid by every stem a new question asks, found or not.
        self._part_readers: dict[Path, _PartReader] = {}

    @classmethod
    def default(cls) -> ParseCache:
        return cls(default_directory())

    @property
    def enabled(self) -> bool:
        return self._directory is not None

    def database(self, bundle_path: str) -> Path | None:
        """The file this bundle's rows live in (``None`` when the cache is off)."""
        if self._directory is None:
            return None
        key = hashlib.sha256(bundle_path.encode("utf-8", "surrogateescape")).hexdigest()
        return self._directory / f"{key}{SUFFIX}"

    def parts(self, bundle_path: str) -> KeptParts | None:
        """The bundle's kept parts (``None`` when the cache is off)."""
        database = self.database(bundle_path)
        return None if database is None else KeptParts(self, bundle_path, database)

    def settle_parts(self, timeout: float | None = None) -> None:
        """Wait until every write of a kept part started so far is done, for at most
        ``timeout`` seconds in all (the warm-up's save, tests, benchmarks)."""
        with self._warned_lock:
            writes = list(self._part_writes)
        deadline = None if timeout is None else time.monotonic() + timeout
        for write in writes:
            write.join(None if deadline is None else max(0.0, deadline - time.monotonic()))

    def _wait_for_database(self, database: Path, write: Callable[[], None]) -> bool:
        """Keep ``write`` until a save makes ``database`` (at most :data:`MAX_WAITING_PARTS`
        of them; past that the part is dropped: it is computed again by the next process).
        False when the database exists already (write now)."""
        with self._warned_lock:
            if database.exists():
                return False
            waiting = self._waiting_parts.setdefault(database, [])
            if len(waiting) < MAX_WAITING_PARTS:
                waiting.append(write)
            return True

    def _part_reader(self, database: Path) -> _PartReader:
        with self._warned_lock:
            reader = self._part_readers.get(database)
            if reader is None:
                reader = self._part_readers[database] = _PartReader(database)
            return reader

    def _saving(self, database: Path) -> threading.Lock:
        """Held by this process's save of ``database`` for as long as it runs."""
        with self._warned_lock:
            return self._save_locks.setdefault(database, threading.Lock())

    def _saved(self, database: Path) -> None:
        with self._warned_lock:
            waiting = self._waiting_parts.pop(database, [])
        if waiting:
            # One thread for them all, one part after the other (each write holds _one_part
            # anyway). A thread each made glibc give most of them a malloc arena of its own,
            # whose freed buffers (the frames, SQLite's pages) stayed resident: a cold warm-up's
            # save left the process about 90 MiB larger at 9,978 concepts.
            self._start_part_write(functools.partial(_each, tuple(waiting)))

    def _start_part_write(self, write: Callable[[], None]) -> None:
        thread = threading.Thread(target=write, name="bundle-mcp-kept-part", daemon=True)
        with self._warned_lock:
            self._part_writes = [w for w in self._part_writes if w.is_alive()]
            self._part_writes.append(thread)
        thread.start()

    def rows_to_come(self, bundle_path: str) -> CachedRows | None:
        """No rows, for a first load with no database to read (``None`` when the cache is
        off): the snapshot can still keep its whole-bundle values (``CachedRows.keep_edges``,
        ``keep_json``), which wait for the first save to make the database."""
        database = self.database(bundle_path)
        return None if database is None else CachedRows(
            database, {}, parts=self.parts(bundle_path), bundle_path=bundle_path)

    def load(self, bundle_path: str) -> CachedRows | None:
        """The bundle's rows (``None`` when absent, unreadable, corrupt or foreign): every
        file's key and parse error now, each entry when its document is first built."""
        database = self.database(bundle_path)
        if database is None or not database.exists():
            return None
        try:
            with _connected(database, read_only=True) as db:
                if not _is_ours(db, bundle_path):
                    return None
                rows = db.execute(_LOAD_ROWS).fetchall()
        except sqlite3.Error:
            return None
        return CachedRows(database, *_rows_and_stats(rows), parts=self.parts(bundle_path),
                          bundle_path=bundle_path)

    def save(
        self, bundle_path: str, documents: Documents,
        stats: Mapping[str, StatKey] | None = None,
    ) -> None:
        """Insert the rows the database lacks and drop those of files no longer there, in one
        transaction; a cache that cannot be written is skipped. ``stats``: each file's stat as
        the capture of ``documents`` took it; the settled ones are kept for the next process's
        walk to trust.

        The first failure is logged (one warning per cache, however many saves follow): the
        server works on, only a restart parses the bundle again. A corrupt or foreign database
        is replaced.
        """
        database = self.database(bundle_path)
        if database is None:
            return
        try:
            database.parent.mkdir(parents=True, exist_ok=True)
            with self._saving(database):
                try:
                    self._write(database, bundle_path, documents, stats or {})
                except sqlite3.DatabaseError as exc:
                    if isinstance(exc, sqlite3.OperationalError) and not _corrupt(exc):
                        raise
                    # Not a database, or a damaged one: start it again.
                    _remove(database)
                    self._write(database, bundle_path, documents, stats or {})
            self._saved(database)
            _prune(database.parent)
        except sqlite3.OperationalError as exc:
            if not _contended(exc):
                self._warn(exc)
            # Another process held the database past the busy timeout, or two connections
            # switching a new database to WAL met (SQLite then answers "locked" at once): that
            # writer saves the same rows, and a row missed costs one parse at the next start.
            log.debug("parse cache save skipped: %s", exc)
        except (OSError, sqlite3.Error) as exc:
            self._warn(exc)
        except FileMoved as exc:
            # A document's file changed since its snapshot was captured, and its text was to
            # be read back (a damaged facts row, made again): the next capture's save
            # writes its rows.
            log.debug("parse cache save skipped: %s", exc)

    def _write(
        self, database: Path, bundle_path: str, documents: Documents,
        stats: Mapping[str, StatKey],
    ) -> None:
        with _connected(database, read_only=False) as db:
            db.execute("BEGIN IMMEDIATE")
            try:
                if not _is_ours(db, bundle_path):
                    for table in _TABLES:
                        db.execute(f"DELETE FROM {table}")
                    db.executemany(
                        "INSERT INTO meta(key, value) VALUES (?, ?)",
                        (("format", FORMAT), ("bundle", bundle_path)),
                    )
                stored = set(db.execute("SELECT path, sha256 FROM documents"))
                with_facts = set(db.execute("SELECT path, sha256 FROM facts"))
                current = {(r.path, r.sha256) for r in documents.records()}
                # Only what is built: a document no call has needed yet is not built for the
                # cache (its row is written by a later save, or costs one parse at next start).
                built = list(documents.built())
                db.executemany(
                    "INSERT OR IGNORE INTO documents(path, sha256, size, error, entry)"
                    " VALUES (?, ?, ?, ?, ?)",
                    (
                        (doc.path, doc.record.sha256, doc.record.size,
                         None if doc.parse_error is None else _json(doc.parse_error.as_row()),
                         _json(encode_entry(doc)))
                        for doc in built
                        if (doc.path, doc.record.sha256) not in stored
                    ),
                )
                # Each row's facts are encoded as SQLite takes it and let go: held in a list,
                # a cold save held every document's (22 MiB at 10,000 concepts), and the
                # holes they left kept the process that much larger.
                with_new_facts: list[Document] = []

                def new_facts() -> Iterator[tuple[str, str, str | bytes, bytes]]:
                    for doc in built:
                        if (doc.path, doc.record.sha256) in with_facts:
                            continue
                        stored = stored_facts(doc)
                        if stored is not None:
                            with_new_facts.append(doc)
                            yield doc.path, doc.record.sha256, *stored

                db.executemany(
                    "INSERT OR IGNORE INTO facts(path, sha256, facts, spans)"
                    " VALUES (?, ?, ?, ?)",
                    new_facts(),
                )
                db.executemany(
                    "INSERT OR IGNORE INTO targets(target, path, sha256) VALUES (?, ?, ?)",
                    ((target, doc.path, doc.record.sha256)
                     for doc in with_new_facts for target in edge_targets(doc)),
                )
                db.executemany(
                    "DELETE FROM targets WHERE path = ? AND sha256 = ?", with_facts - current)
                _write_derived(db, built, current)
                # Their words stay in the FTS5 table, never read again (section_rows).
                db.executemany(
                    "DELETE FROM section_docs WHERE path = ? AND sha256 = ?",
                    set(db.execute("SELECT path, sha256 FROM section_docs")) - current)
                for table, keys in (("documents", stored), ("facts", with_facts)):
                    db.executemany(
                        f"DELETE FROM {table} WHERE path = ? AND sha256 = ?",
                        keys - current,
                    )
                _write_stats(db, documents, stats)
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise

    def _warn(self, exc: OSError | sqlite3.Error) -> None:
        with self._warned_lock:
            first, self._warned = not self._warned, True
        if first:
            reason = (
                errno.errorcode.get(exc.errno or 0, "error")
                if isinstance(exc, OSError)
                else str(exc)
            )
            log.warning(
                "the parse cache in %s cannot be written (%s); serving without it, so a "
                "restart parses the bundle again (set BUNDLE_MCP_CACHE_DIR to a writable "
                "folder, or to off)",
                self._directory,
                reason,
            )


def _write_derived(
    db: sqlite3.Connection, built: list[Document], current: set[tuple[str, str]]
) -> None:
    """Insert the kept slot values the database lacks; drop those of bytes no longer current."""
    have = set(db.execute("SELECT path, sha256, key FROM derived"))
    db.executemany(
        "INSERT OR IGNORE INTO derived(path, sha256, key, value) VALUES (?, ?, ?, ?)",
        ((doc.path, doc.record.sha256, key,
          zstd_frames.packed(_json(value).encode("utf-8")))
         for doc in built
         for key, value in kept_values(doc, _missing(have, doc))),
    )
    db.executemany(
        "DELETE FROM derived WHERE path = ? AND sha256 = ?",
        {(path, sha) for path, sha, _ in have} - current,
    )


def _missing(have: set[tuple[str, str, str]], doc: Document) -> Callable[[str], bool]:
    """Whether the database lacks the kept value ``key`` of ``doc``'s bytes."""
    path, sha256 = doc.path, doc.record.sha256
    return lambda key: (path, sha256, key) not in have


def _write_stats(
    db: sqlite3.Connection, documents: Documents, stats: Mapping[str, StatKey]
) -> None:
    """Make the ``stats`` table hold exactly the settled stats of ``documents``' files.

    A stat is written beside the SHA-256 of the bytes captured with it. The stat of a file
    whose capture is not settled, or that is gone, is deleted: the next process reads it.
    """
    wanted: dict[str, tuple[object, ...]] = {}
    for record in documents.records():
        key = stats.get(record.path)
        if key is not None and key.settled and key.size == record.size:
            wanted[record.path] = (record.sha256, key.dev, key.ino, key.size, key.mtime_ns,
                                   key.ctime_ns)
    have = {path: tuple(rest) for path, *rest in db.execute(
        "SELECT path, sha256, dev, ino, size, mtime_ns, ctime_ns FROM stats")}
    db.executemany("DELETE FROM stats WHERE path = ?",
                   ((path,) for path in have.keys() - wanted.keys()))
    db.executemany(
        "INSERT OR REPLACE INTO stats(path, sha256, dev, ino, size, mtime_ns, ctime_ns)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)",
        ((path, *row) for path, row in wanted.items() if have.get(path) != row),
    )


@contextlib.contextmanager
def _connected(database: Path, *, read_only: bool) -> Iterator[sqlite3.Connection]:
    """A connection in autocommit mode (transactions are explicit), closed on exit."""
    if read_only:
        db = sqlite3.connect(
            f"{database.as_uri()}?mode=ro", uri=True, isolation_level=None,
            timeout=BUSY_TIMEOUT_MS / 1000, check_same_thread=False,
        )
    else:
        db = sqlite3.connect(
            database, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000,
            check_same_thread=False,
        )
    try:
        if not read_only:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute(f"PRAGMA journal_size_limit={WAL_KEPT_BYTES}")
            for statement in _SCHEMA:
                db.execute(statement)
        yield db
    finally:
        if not read_only:
            _truncate_log(db)
        db.close()


def _truncate_log(db: sqlite3.Connection) -> None:
    """Copy the write-ahead log into the database and empty it, as the last connection's close
    would: a connection of this process that only reads (``_PartReader``, ``CachedRows``) is
    usually still open when a writer closes, and a reader cannot. The log of a first save
    holds the whole database (190 MiB at 9,978 files, 780 MiB at 50,000), left beside it,
    and the next process to open it read it all back. Another process reading meanwhile makes
    this wait a moment at most; then the log is emptied by a later write."""
    try:
        db.execute(f"PRAGMA busy_timeout={CHECKPOINT_WAIT_MS}")
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    except sqlite3.Error as exc:
        log.debug("the parse cache's log is not emptied: %s", exc)


class KeptParts:
    """The ``parts`` rows of one bundle's database: what a tool computed for one query term
    over a whole snapshot, and the answers kept per snapshot (``bundle_mcp.stored_answers``),
    keyed by the snapshot's revision, so that the next process reads them instead of computing
    them (:class:`bundle_mcp.toolspec.PartStore`). Like every row here a cache: a part that is
    missing, damaged or unreadable is computed."""

    def __init__(self, cache: ParseCache, bundle_path: str, database: Path) -> None:
        self._cache = cache
        self._bundle_path = bundle_path
        self._database = database

    def read(self, revision: str, key: str) -> bytes | None:
        """The part's bytes, ``None`` when none is kept for this revision and key."""
        row = self._cache._part_reader(self._database).row(self._bundle_path, revision, key)
        if row is None:
            return None
        try:
            value = zstd_frames.unpacked(row[0])
        except (TypeError, zstd_frames.DamagedFrame):
            return None
        return value

    def keep(self, revision: str, key: str, value: bytes | Iterable[bytes], *,
             latest: bool = False) -> None:
        """Write the part in the background, keeping the newest :data:`MAX_PARTS` rows. Only
        into a database a save has started (it says whose rows it holds): before the first
        save the write waits for it (``ParseCache._wait_for_database``). A write that fails is
        skipped (logged once, as a save's): the next process computes that part.

        ``latest``: the part replaces the rows of the same key kept for other revisions (a
        whole-bundle value of megabytes, which only a process on those very files reads: one
        kept per restart on new files would fill the cache). ``value`` in pieces (an iterable
        of bytes, read once): they are made and compressed one after the other, by the
        writing thread.

        A part that is bytes and must wait for the first save is compressed at once and waits
        as its frame: a cold warm-up keeps its whole-bundle values long before its save (about
        20 MiB at 9,978 concepts, 5 as frames), and they were held whole until then, at the
        server's highest memory. Pieces still wait as they are: they are made as written."""
        write = functools.partial(self._write, revision, key, value, latest=latest)
        if isinstance(value, bytes) and not self._database.exists():
            write = functools.partial(self._write_frame, revision, key,
                                      zstd_frames.packed(value), latest=latest)
        if not self._cache._wait_for_database(self._database, write):
            self._cache._start_part_write(write)

    def _write(self, revision: str, key: str, value: bytes | Iterable[bytes], *,
               latest: bool = False) -> None:
        # One part at a time, made, compressed and written before the next: the parts a cold
        # warm-up kept wait for its first save and then all start at once, and their pieces
        # held together raised the server's highest memory.
        with self._cache._one_part:
            if self._database.exists():
                self._store(revision, key, zstd_frames.packed(value), latest=latest)

    def _write_frame(self, revision: str, key: str, frame: bytes, *, latest: bool) -> None:
        """:meth:`_write` of a part compressed when it was kept (``zstd_frames.packed``)."""
        with self._cache._one_part:
            if self._database.exists():
                self._store(revision, key, frame, latest=latest)

    def _store(self, revision: str, key: str, compressed: bytes, *, latest: bool,
               again: bool = True) -> None:
        try:
            with _connected(self._database, read_only=False) as db:
                db.execute("BEGIN IMMEDIATE")
                try:
                    if _is_ours(db, self._bundle_path):
                        if latest:
                            db.execute("DELETE FROM parts WHERE key = ? AND revision != ?",
                                       (key, revision))
                        # REPLACE: a part is written again only when the kept one did not decode.
                        db.execute("INSERT OR REPLACE INTO parts(revision, key, value)"
                                   " VALUES (?, ?, ?)", (revision, key, compressed))
                        db.execute("DELETE FROM parts WHERE rowid NOT IN"
                                   " (SELECT rowid FROM parts ORDER BY rowid DESC LIMIT ?)",
                                   (MAX_PARTS,))
                    db.execute("COMMIT")
                except BaseException:
                    if db.in_transaction:
                        db.execute("ROLLBACK")
                    raise
        except sqlite3.OperationalError as exc:
            if not _contended(exc):
                self._cache._warn(exc)
            elif again:
                # A save at the file cap holds the database for seconds, past the busy
                # timeout (a cold warm-up keeps its whole-bundle values meanwhile): once more,
                # after this process's save under way, if any.
                with self._cache._saving(self._database):
                    pass
                self._store(revision, key, compressed, latest=latest, again=False)
                return
            log.debug("kept part %s skipped: %s", key, exc)
        except (OSError, sqlite3.Error) as exc:
            self._cache._warn(exc)


def _each(writes: tuple[Callable[[], None], ...]) -> None:
    for write in writes:
        write()


class _PartReader:
    """A kept read-only connection to one database, for its ``parts`` rows: opened on the first
    read, opened again when the file was replaced (another file at its path: a corrupt or
    foreign one is replaced by a save), closed with its :class:`ParseCache`. Whose rows the
    database holds is checked at every read, as a connection of its own would."""

    def __init__(self, database: Path) -> None:
        self._database = database
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        self._identity: tuple[int, int] | None = None  # the file's (st_dev, st_ino) when opened

    def row(self, bundle_path: str, revision: str, key: str) -> tuple[Any, ...] | None:
        """The part's row, ``None`` when there is none or the database cannot be read."""
        try:
            stat = os.stat(self._database)
        except OSError:
            return None
        identity = (stat.st_dev, stat.st_ino)
        try:
            with self._lock:
                if self._db is None or identity != self._identity:
                    self._close()
                    self._db = sqlite3.connect(
                        f"{self._database.as_uri()}?mode=ro", uri=True, isolation_level=None,
                        timeout=BUSY_TIMEOUT_MS / 1000, check_same_thread=False,
                    )
                    self._identity = identity
                    weakref.finalize(self, self._db.close)
                db = self._db
                if not _is_ours(db, bundle_path):
                    return None
                row: tuple[Any, ...] | None = db.execute(
                    "SELECT value FROM parts WHERE revision = ? AND key = ?",
                    (revision, key)).fetchone()
                return row
        except sqlite3.Error:
            with self._lock:
                self._close()
            return None

    def _close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None


# Files a query of read_ahead_entries names (SQLite's default limit of bound values is 32,766
# since 3.32, 999 before).
_AHEAD_PER_QUERY = 500
# A revision's edges in the parts rows (CachedRows.keep_edges): how edges resolve is the
# release's, so the release names the row.
EDGES_PART = f"edges/2/{__version__}/"
# The same for a JSON value of a revision (CachedRows.keep_json).
JSON_PART = f"json/1/{__version__}/"
# And for a value with its own packing (CachedRows.keep_bytes), which its owner unpacks.
BYTES_PART = f"bytes/1/{__version__}/"
_EDGES_MAGIC = b"bme2" + (b"L" if sys.byteorder == "little" else b"B")
# The strings' JSON length, the number of edges, the number of positions in the index.
_EDGES_HEADER = struct.Struct("<QQQ")
_EDGE_FIELDS = 6


def packed_edges(edges: tuple[Edge, ...]) -> bytes:
    """Edges as their distinct strings (JSON), six numbers an edge into them, and the index
    of the edges touching each string as a source or target ID (:class:`~bundle_mcp.model.
    EdgeColumns`): each string's start in the positions, then the positions, ascending."""
    table: dict[str, int] = {}
    numbers = array("I")
    touching: dict[int, list[int]] = {}
    for position, edge in enumerate(edges):
        for value in (edge.kind, edge.source_id, edge.target_id, edge.source_ref,
                      edge.target_ref, edge.relationship):
            n = table.get(value)
            if n is None:
                n = table[value] = len(table)
            numbers.append(n)
        source, target = numbers[-5], numbers[-4]
        touching.setdefault(source, []).append(position)
        if target != source:
            touching.setdefault(target, []).append(position)
    starts, positions = array("I", [0]), array("I")
    for n in range(len(table)):
        positions.extend(touching.get(n, ()))
        starts.append(len(positions))
    strings = json.dumps(list(table), ensure_ascii=False, separators=(",", ":")).encode()
    return b"".join((_EDGES_MAGIC, _EDGES_HEADER.pack(len(strings), len(edges), len(positions)),
                     strings, numbers.tobytes(), starts.tobytes(), positions.tobytes()))


def unpacked_edges(data: bytes) -> tuple[Edge, ...] | None:
    """What :func:`packed_edges` wrote, in its order (the caller checks it); ``None`` for
    anything else."""
    columns = edge_columns(data)
    if columns is None:
        return None
    table, numbers = columns.table, columns.numbers
    # Field by field in C (each a column of the numbers); only Edge's constructor is Python.
    fields = [map(table.__getitem__, numbers[n::_EDGE_FIELDS]) for n in range(_EDGE_FIELDS)]
    try:
        return tuple(map(Edge, *fields))
    except IndexError:  # a number past the strings
        return None


def edge_columns(data: bytes) -> KeptEdgeColumns | None:
    """What :func:`packed_edges` wrote, as read: the strings (interned), the six numbers of
    each edge into them in :class:`~bundle_mcp.model.Edge`'s field order, and the index of the
    edges touching each string; ``None`` unless the sizes agree and the index's starts fit
    its positions. What the numbers and the index say is checked as edges are made from them
    (a number past the strings, a position past the edges, an edge the index names for a
    string it does not touch): checked here, the first call of a restarted server paid for
    every edge."""
    head = len(_EDGES_MAGIC) + _EDGES_HEADER.size
    if len(data) < head or not data.startswith(_EDGES_MAGIC):
        return None
    length, count, touching = _EDGES_HEADER.unpack_from(data, len(_EDGES_MAGIC))
    numbers, starts, positions = array("I"), array("I"), array("I")
    size = numbers.itemsize
    at = head + length
    if len(data) < at:
        return None
    try:
        strings = json.loads(data[head:at])
    except (UnicodeDecodeError, ValueError):
        return None
    if not isinstance(strings, list) or not set(map(type, strings)) <= {str}:
        return None
    ends = (at + count * _EDGE_FIELDS * size, (len(strings) + 1) * size, touching * size)
    if len(data) != ends[0] + ends[1] + ends[2]:
        return None
    table = list(map(sys.intern, strings))
    numbers.frombytes(data[at:ends[0]])
    starts.frombytes(data[ends[0]:ends[0] + ends[1]])
    positions.frombytes(data[ends[0] + ends[1]:])
    # A position past the edges is found as the edges it names are made (EdgeColumns.of): a
    # max() over the 260,000 positions of the bench bundle was 14 ms of every restart's first
    # walk or neighbour list.
    if (starts[0] != 0 or starts[-1] != len(positions)
            or not all(map(operator.le, starts, itertools.islice(starts, 1, None)))):
        return None
    return KeptEdgeColumns(table, numbers, starts, positions)


@dataclass(frozen=True, slots=True)
class Stored:
    """What a load reads of one row up front: the bytes it describes and their parse error."""

    sha256: str
    size: int
    error: str | None  # the parse error as JSON; None when the file parses

    def parse_error(self) -> Diagnostic | None:
        """The stored parse error. Raises ValueError (or TypeError) for a damaged value."""
        return None if self.error is None else Diagnostic.from_row(json.loads(self.error))


class CachedRows(Mapping[str, Any]):
    """One bundle's rows, by path: :meth:`stored` answers from what the load read; each entry
    (``rows[path]``) is read from the database when asked, through one read-only connection
    kept while anything may still ask (closed when the rows are dropped)."""

    def __init__(
        self, database: Path, rows: Mapping[str, Stored],
        stats: Mapping[str, StatKey] | None = None, *, parts: KeptParts | None = None,
        bundle_path: str | None = None,
    ) -> None:
        self._database = database
        self._bundle_path = bundle_path  # whose rows the database must hold to be written
        self._rows = rows
        self._stats = stats or {}
        # Where a revision's edges are kept (stored_edges, keep_edges); None: they are not.
        self._parts = parts
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        # Rows read ahead (read_ahead), by key: (path, sha256) → the compressed value.
        self._ahead: dict[str, dict[tuple[str, str], bytes]] = {}
        # Documents' rows read ahead (read_ahead_entries): (path, sha256) → (entry, facts, spans).
        self._ahead_entries: dict[tuple[str, str], tuple[Any, ...]] = {}
        self._ahead_frontmatter: dict[tuple[str, str], Any] = {}
        # The (path, sha256) of every file with facts (so with targets), and the database's
        # data_version it was read at: read again after any other connection's commit.
        self._indexed: tuple[int, frozenset[tuple[str, str]]] | None = None
        # The section words' own read connection (a count of a common word takes tens of
        # milliseconds, which a document's row read on the kept one never waits behind), and
        # the documents it read last (section_rows).
        self._words_lock = threading.Lock()
        self._words_db: sqlite3.Connection | None = None
        self._section_docs: section_rows.KeptDocs | None = None

    def stored(self, path: str) -> Stored | None:
        return self._rows.get(path)

    def kept_rows(self) -> int:
        """:meth:`bundle_mcp.model.InboundHint.kept_rows`."""
        return len(self._rows)

    def folders(self) -> frozenset[str]:
        """The folders of the rows' paths and their parents, the root (``""``) included: those
        a load that starts from these rows watches before its walk (``snapshots``)."""
        folders = {""}
        for path in self._rows:
            folder = path.rpartition("/")[0]
            while folder not in folders:
                folders.add(folder)
                folder = folder.rpartition("/")[0]
        return frozenset(folders)

    def trusted_stats(self) -> Mapping[str, StatKey]:
        """The settled stat of each file whose row it goes with: a walk that finds a file with
        the same stat takes its bytes to be the row's, without reading them."""
        return self._stats

    def __iter__(self) -> Iterator[str]:
        return iter(self._rows)

    def __len__(self) -> int:
        return len(self._rows)

    def __getitem__(self, path: str) -> Any:
        stored = self._rows[path]
        entry = self.entry(path, stored.sha256)
        if entry is None:
            raise KeyError(path)
        return entry

    def sources(self, concept_id: str, records: Mapping[str, str]) -> frozenset[str] | None:
        """:meth:`bundle_mcp.model.InboundHint.sources` from the ``targets`` table: the files of
        ``records`` whose bytes' row names ``concept_id``, and those whose bytes have no facts
        row (the index cannot speak for them). Read in one transaction, so rows another
        process prunes meanwhile count as unknown; ``None`` when the database cannot be read."""
        try:
            with self._lock:
                db = self._connection()
                db.execute("BEGIN")
                try:
                    version = db.execute("PRAGMA data_version").fetchone()[0]
                    if self._indexed is None or self._indexed[0] != version:
                        self._indexed = (version, frozenset(
                            db.execute("SELECT path, sha256 FROM facts")))
                    indexed = self._indexed[1]
                    named = set(db.execute(
                        "SELECT path, sha256 FROM targets WHERE target = ?", (concept_id,)))
                finally:
                    db.execute("COMMIT")
        except sqlite3.Error:
            return None
        return frozenset(
            path for path, sha in records.items()
            if (path, sha) in named or (path, sha) not in indexed
        )

    def stored_edges(self, revision: str, name: str) -> tuple[Edge, ...] | None:
        """:meth:`bundle_mcp.model.InboundHint.stored_edges`, from the ``parts`` rows."""
        data = None if self._parts is None else self._parts.read(revision, EDGES_PART + name)
        return None if data is None else unpacked_edges(data)

    def stored_edge_columns(self, revision: str, name: str) -> KeptEdgeColumns | None:
        """:meth:`bundle_mcp.model.InboundHint.stored_edge_columns`, from the ``parts`` rows."""
        data = None if self._parts is None else self._parts.read(revision, EDGES_PART + name)
        return None if data is None else edge_columns(data)

    def keep_edges(self, revision: str, name: str, edges: tuple[Edge, ...]) -> None:
        if self._parts is not None:
            self._parts.keep(revision, EDGES_PART + name, packed_edges(edges))

    def stored_json(self, revision: str, name: str) -> Any:
        """:meth:`bundle_mcp.model.InboundHint.stored_json`, from the ``parts`` rows."""
        data = None if self._parts is None else self._parts.read(revision, JSON_PART + name)
        if data is None:
            return None
        try:
            return json.loads(data)
        except (UnicodeDecodeError, ValueError):
            return None

    def keep_json(self, revision: str, name: str, value: Any) -> None:
        if self._parts is not None:
            self._parts.keep(revision, JSON_PART + name, _json(value).encode("utf-8"))

    def frontmatter(self, path: str, sha256: str) -> Unfrozen | None:
        """:meth:`bundle_mcp.model.InboundHint.frontmatter`, from the ``documents`` row (read
        ahead, or read now)."""
        with self._lock:
            row = self._ahead_frontmatter.pop((path, sha256), None)
        if row is None:
            row = self._row("SELECT entry FROM documents WHERE path = ? AND sha256 = ?",
                            (path, sha256))
        if row is None:
            return None
        try:
            entry = json.loads(row[0])
        except (TypeError, ValueError):
            return None
        if (not isinstance(entry, dict) or entry.get("sha256") != sha256
                or entry.get("parse_error") is not None):
            return None
        value = entry.get("frontmatter")
        if value is None:
            return Unfrozen({})
        return Unfrozen(value) if isinstance(value, dict) else None

    def stored_bytes(self, revision: str, name: str) -> bytes | None:
        """:meth:`bundle_mcp.model.InboundHint.stored_bytes`, from the ``parts`` rows."""
        return None if self._parts is None else self._parts.read(revision, BYTES_PART + name)

    def keep_bytes(self, revision: str, name: str, value: bytes | Iterable[bytes]) -> None:
        if self._parts is not None:
            self._parts.keep(revision, BYTES_PART + name, value, latest=True)

    def section_words(self, version: str, terms: Sequence[str], weights: tuple[int, int, int]
                      ) -> KeptSectionWords | None:
        """:meth:`bundle_mcp.model.InboundHint.section_words`, in one read transaction on the
        kept connection (the documents read before are read again only past the last one);
        ``None`` when nothing is kept by these rules or the database cannot be read (the
        caller reads the documents)."""
        try:
            with self._words_lock:
                if self._words_db is None:
                    self._words_db = self._read_only()
                found = section_rows.read_counts(self._words_db, version, terms, weights,
                                                 self._section_docs)
                if found is None:
                    return None
                self._section_docs, words = found
                return words
        except sqlite3.Error as exc:
            log.debug("kept section words not read: %s", exc)
            return None

    def keep_section_words(self, version: str,
                           documents: Iterable[tuple[str, str, SectionRows]]) -> bool:
        """:meth:`bundle_mcp.model.InboundHint.keep_section_words`: one write transaction, into
        a database a save has made for this bundle only; ``False`` when nothing could be
        written (no database yet, another bundle's, no FTS5 here, locked past the busy timeout,
        a full disk)."""
        if self._bundle_path is None or not self._database.exists():
            return False
        try:
            with _connected(self._database, read_only=False) as db:
                db.execute("BEGIN IMMEDIATE")
                try:
                    kept = (_is_ours(db, self._bundle_path)
                            and section_rows.prepare(db, version))
                    if kept:
                        section_rows.write(db, version, documents)
                    db.execute("COMMIT")
                    return kept
                except BaseException:
                    if db.in_transaction:
                        db.execute("ROLLBACK")
                    raise
        except (OSError, sqlite3.Error) as exc:
            log.debug("section words not kept: %s", exc)
            return False

    def kept(self, path: str, sha256: str) -> Callable[[str], Any]:
        """:meth:`derived` for these bytes, by key: a ``Document.stored``."""
        return _Kept(self, path, sha256)

    def derived(self, path: str, sha256: str, key: str) -> Any:
        """The kept value of a document slot for these bytes (JSON data), ``None`` when none was
        kept or it cannot be read; the slot's codec decides whether it fits."""
        with self._lock:
            ahead = self._ahead.get(key)
            value = None if ahead is None else ahead.pop((path, sha256), None)
            if ahead is not None and not ahead:
                del self._ahead[key]  # every one handed out
        if value is None:
            row = self._row(
                "SELECT value FROM derived WHERE path = ? AND sha256 = ? AND key = ?",
                (path, sha256, key))
            if row is None:
                return None
            value = row[0]
        try:
            return json.loads(zstd_frames.unpacked(value))
        except (TypeError, ValueError):  # DamagedFrame is a ValueError
            return None

    def read_ahead(self, key: str, paths: Sequence[str] | None = None) -> None:
        """:meth:`bundle_mcp.model.InboundHint.read_ahead`: one query in place of one a file
        (at 9,978 files, about a third of the section words' read back). Only the rows of the
        files as these rows have them, held compressed until handed out; one this process never
        asks for stays until the rows are let go. A database that cannot be read reads nothing
        ahead. Every file's rows replace those held for ``key``; some files' are added to them
        (the warm-up's, if it stood aside for the call that reads these)."""
        rows: list[tuple[str, str, bytes]] = []
        try:
            with self._lock:
                db = self._connection()
                if paths is None:
                    rows = db.execute(
                        "SELECT path, sha256, value FROM derived WHERE key = ?", (key,)
                    ).fetchall()
                else:
                    for start in range(0, len(paths), _AHEAD_PER_QUERY):
                        group = paths[start:start + _AHEAD_PER_QUERY]
                        rows += db.execute(
                            "SELECT path, sha256, value FROM derived WHERE key = ?"
                            f" AND path IN ({','.join('?' * len(group))})", [key, *group])
        except sqlite3.Error:
            return
        current = self._rows
        ahead = {(path, sha256): value for path, sha256, value in rows
                 if (stored := current.get(path)) is not None and stored.sha256 == sha256}
        with self._lock:
            if paths is None:
                self._ahead[key] = ahead
            elif ahead:
                self._ahead.setdefault(key, {}).update(ahead)

    def _row(self, sql: str, parameters: tuple[str, ...]) -> tuple[Any, ...] | None:
        """The first row of a query on the kept connection; ``None`` when there is none or the
        database cannot be read (a cache miss, never a failure)."""
        try:
            with self._lock:
                row: tuple[Any, ...] | None = self._connection().execute(
                    sql, parameters).fetchone()
                return row
        except sqlite3.Error:
            return None

    def _connection(self) -> sqlite3.Connection:
        """The kept read-only connection (the caller holds the lock)."""
        if self._db is None:
            self._db = self._read_only()
        return self._db

    def _read_only(self) -> sqlite3.Connection:
        """A read-only connection, closed when these rows go."""
        db = sqlite3.connect(
            f"{self._database.as_uri()}?mode=ro", uri=True, isolation_level=None,
            timeout=BUSY_TIMEOUT_MS / 1000, check_same_thread=False,
        )
        weakref.finalize(self, db.close)
        return db

    def read_ahead_entries(self, paths: Sequence[str]) -> None:
        """:meth:`bundle_mcp.model.InboundHint.read_ahead_entries`: the rows of these files'
        current bytes in one query, for :meth:`entry` to hand out (each once) in place of a
        query each (at 9,978 files, 0.26 s of queries one by one, 0.10 s in one). They replace
        the rows read ahead before, so at most one group's are ever held."""
        current = self._rows
        wanted = [(path, stored.sha256) for path in paths
                  if (stored := current.get(path)) is not None]
        ahead: dict[tuple[str, str], tuple[Any, ...]] = {}
        try:
            with self._lock:
                for start in range(0, len(wanted), _AHEAD_PER_QUERY):
                    group = wanted[start:start + _AHEAD_PER_QUERY]
                    marks = ",".join("?" * len(group))
                    for row in self._connection().execute(
                            "SELECT d.path, d.sha256, d.entry, f.facts, f.spans"
                            " FROM documents d"
                            " LEFT JOIN facts f ON f.path = d.path AND f.sha256 = d.sha256"
                            f" WHERE d.path IN ({marks})", [path for path, _ in group]):
                        ahead[(row[0], row[1])] = (row[2], row[3], row[4])
        except sqlite3.Error:
            ahead = {}
        with self._lock:
            self._ahead_entries = {key: row for key, row in ahead.items()
                                   if current.get(key[0]) is not None
                                   and current[key[0]].sha256 == key[1]}

    def read_ahead_frontmatter(self, paths: Sequence[str]) -> None:
        """:meth:`bundle_mcp.model.InboundHint.read_ahead_frontmatter`: the entries of these
        files' current bytes in one query (a group of :data:`_AHEAD_PER_QUERY`), for
        :meth:`frontmatter` to hand out (each once). They replace those read ahead before, so
        at most one group's are ever held (a call reads ahead the next group when it needs
        it)."""
        current = self._rows
        wanted = [path for path in paths[:_AHEAD_PER_QUERY] if path in current]
        ahead: dict[tuple[str, str], Any] = {}
        if not wanted:
            return
        try:
            with self._lock:
                marks = ",".join("?" * len(wanted))
                for path, sha256, entry in self._connection().execute(
                        f"SELECT path, sha256, entry FROM documents WHERE path IN ({marks})",
                        wanted):
                    if current[path].sha256 == sha256:
                        ahead[(path, sha256)] = (entry,)
        except sqlite3.Error:
            ahead = {}
        with self._lock:
            self._ahead_frontmatter = ahead

    def entry(self, path: str, sha256: str) -> Any:
        """The decoded entry of these bytes, its Markdown facts as text under ``markdown``;
        ``None`` when the row is gone (another process pruned it), damaged, or unreadable."""
        with self._lock:
            row = self._ahead_entries.pop((path, sha256), None)
        if row is None:
            row = self._row(
                "SELECT d.entry, f.facts, f.spans FROM documents d LEFT JOIN facts f"
                " ON f.path = d.path AND f.sha256 = d.sha256"
                " WHERE d.path = ? AND d.sha256 = ?", (path, sha256))
        if row is None:
            return None
        try:
            entry = json.loads(row[0])
        except (TypeError, ValueError):
            return None  # a damaged row: that file is parsed
        if not isinstance(entry, dict):
            return None
        entry["markdown"], entry["spans"] = row[1], row[2]
        return entry


class _Kept:
    """:meth:`CachedRows.kept`: one document's ``stored`` for its life, so a slotted object
    (56 bytes; a ``functools.partial`` of the bound method was about 250)."""

    __slots__ = ("_rows", "_path", "_sha256")

    def __init__(self, rows: CachedRows, path: str, sha256: str) -> None:
        self._rows = rows
        self._path = path
        self._sha256 = sha256

    def __call__(self, key: str) -> Any:
        return self._rows.derived(self._path, self._sha256, key)


def _is_ours(db: sqlite3.Connection, bundle_path: str) -> bool:
    """Whether the database holds this bundle's rows in this format (a missing table: no)."""
    try:
        meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return False
        raise
    return meta.get("format") == FORMAT and meta.get("bundle") == bundle_path


# Every document row with the settled stat kept beside its bytes, if any, in one query. Only
# integers where the schema says so (a value of another type is a damaged row: that file is not
# trusted, or not cached). Only the stats of bytes that have a row: a trusted file is never
# read, so everything about it must come from here.
_LOAD_ROWS = (
    "SELECT d.path, d.sha256, d.size, d.error, s.dev, s.ino, s.mtime_ns, s.ctime_ns"
    " FROM documents d LEFT JOIN stats s ON s.path = d.path AND s.sha256 = d.sha256"
    " AND s.size = d.size AND typeof(s.dev) = 'integer' AND typeof(s.ino) = 'integer'"
    " AND typeof(s.mtime_ns) = 'integer' AND typeof(s.ctime_ns) = 'integer'"
    " WHERE typeof(d.size) = 'integer'"
)


def _rows_and_stats(
    rows: list[tuple[Any, ...]],
) -> tuple[dict[str, Stored], dict[str, StatKey]]:
    """Each path's row, and the trusted stats. A path has two rows for a moment when a second
    process saw other bytes: the one whose bytes go with the kept stat is the one taken, so a
    trusted file's record is always that of the bytes its stat vouches for."""
    stored: dict[str, Stored] = {}
    stats: dict[str, StatKey] = {}
    for path, sha256, size, error, dev, ino, mtime_ns, ctime_ns in rows:
        if dev is not None:
            stored[path] = Stored(sha256, size, error)
            stats[path] = StatKey(dev, ino, size, mtime_ns, ctime_ns, settled=True)
        elif path not in stats:
            stored[path] = Stored(sha256, size, error)
    return stored, stats


def _corrupt(exc: sqlite3.OperationalError) -> bool:
    # SQLite reports some damage (a torn header, a missing page) as an operational error.
    text = str(exc)
    return "malformed" in text or "not a database" in text


def _contended(exc: sqlite3.OperationalError) -> bool:
    text = str(exc)
    return "database is locked" in text or "database is busy" in text


def _remove(database: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{database}{suffix}").unlink(missing_ok=True)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _prune(directory: Path) -> None:
    """Keep the :data:`MAX_PACKS` newest databases. Other processes share the folder
    (``--workers``, two servers of one user) and prune it too: a file gone between the listing
    and its ``stat`` is one less to remove, never a failed save."""
    dated: list[tuple[float, Path]] = []
    for database in directory.glob(f"*{SUFFIX}"):
        try:
            dated.append((database.stat().st_mtime, database))
        except FileNotFoundError:
            continue
    dated.sort(reverse=True)
    for _mtime, stale in dated[MAX_PACKS:]:
        _remove(stale)


def has_markdown(doc: Document) -> bool:
    """Whether the document's Markdown facts have been computed (and so can be cached)."""
    holder = doc.rules.markdown
    return isinstance(holder, PackedFacts) and holder.computed


def markdown_used(doc: Document) -> bool:
    """Whether the document's Markdown facts were asked for (parsed or read back): what the
    work counters count."""
    holder = doc.rules.markdown
    return isinstance(holder, PackedFacts) and holder.used


def markdown_from_cache(doc: Document) -> bool:
    """Whether the document's Markdown facts are read back from this cache (on each use)."""
    holder = doc.rules.markdown
    return isinstance(holder, PackedFacts) and holder.from_cache


def edge_targets(doc: Document) -> set[str]:
    """The concept IDs the document's links and relations name, whether or not a concept of
    that ID exists (that is the snapshot's to say): a superset of its edges' targets."""
    targets = {link.concept_id for link in doc.markdown.links if link.concept_id is not None}
    targets.update(rel.target_id for rel in doc.relations if rel.target_id is not None)
    return targets


def encode_entry(doc: Document) -> dict[str, Any]:
    """A document's row: everything its loader computed but the Markdown facts."""
    return {
        "sha256": doc.record.sha256,
        "size": doc.record.size,
        "kind": doc.kind,
        "concept_id": doc.concept_id,
        "frontmatter": None if doc.frontmatter is None else thaw(doc.frontmatter),
        "layout": _layout_of(doc),
        "parse_error": None if doc.parse_error is None else doc.parse_error.as_row(),
        "relations": [
            [r.source, r.relation_type, r.target, r.target_id, r.fragment] for r in doc.relations
        ],
        "relation_diagnostics": [d.as_row() for d in doc.relation_diagnostics],
    }


def encode_facts(doc: Document) -> str | None:
    """The document's Markdown facts as JSON text (what :func:`stored_facts`' row decodes to),
    ``None`` when they have not been computed."""
    holder = doc.rules.markdown
    return holder.text(doc) if isinstance(holder, PackedFacts) else None


def stored_facts(doc: Document) -> tuple[str | bytes, bytes] | None:
    """The ``facts`` and ``spans`` columns of the document's row (``PackedFacts.stored``),
    ``None`` when its facts have not been computed."""
    holder = doc.rules.markdown
    return holder.stored(doc) if isinstance(holder, PackedFacts) else None


def _layout_of(doc: Document) -> list[int]:
    """Where the frontmatter block and the body lie, from what the document kept of its split
    (its text is not read: a save must not read every file again)."""
    if doc.parse_error is not None:
        return [0, 0, 0, 1]
    raw_start, raw_end = doc.frontmatter_span or (0, 0)  # no block: the split's zeros
    return [raw_start, raw_end, doc.body_start, doc.body_line]


def decode(
    record: FileRecord, data: bytes, entry: Any,
    stored: Callable[[str], Any] | None = None, hold: Hold = PackedText,
) -> Document | None:
    """The cached document for these bytes (``record``: the capture's record of them, which
    the document keeps: one record per file, not one more), or ``None`` when the entry does
    not fit them. ``stored``: the kept values of its derived structures, by key
    (``Document.stored``). ``hold``: how the document holds its text (``Document.held``)."""
    path, sha256 = record.path, record.sha256
    try:
        if not isinstance(entry, dict) or entry["sha256"] != sha256 or entry["size"] != len(data):
            return None
        if record.size != len(data):
            return None
        text = data.decode("utf-8") if entry["parse_error"] is None else ""
        if entry["parse_error"] is not None:
            broken = _broken_text(data)
            return Document(
                path=path, kind=as_str(entry["kind"]), concept_id=as_opt_str(entry["concept_id"]),
                record=record, held=PackedText(broken), frontmatter_span=None,
                frontmatter_value=None,
                body_start=len(broken), body_line=1, line_count=count_lines(broken),
                rules=OKF_RULES, parse_error=Diagnostic.from_row(entry["parse_error"]),
            )
        frontmatter = entry["frontmatter"]
        layout = _layout(text, entry["layout"], frontmatter is not None)
        if layout is None or not (frontmatter is None or isinstance(frontmatter, dict)):
            return None
        raw_start, raw_end, body_start, body_line = layout
        line_count = count_lines(text)
        return Document(
            path=path,
            kind=as_str(entry["kind"]),
            concept_id=interned_or_none(entry["concept_id"]),
            record=record,
            held=hold(text),
            frontmatter_span=None if frontmatter is None else (raw_start, raw_end),
            frontmatter_value=None if frontmatter is None else Unfrozen(frontmatter),
            body_start=body_start,
            body_line=body_line,
            line_count=line_count,
            rules=_rules(entry["markdown"], entry.get("spans"), line_count),
            stored=stored,
            relations=tuple(
                Relation(interned_str(a), interned_str(b), interned_str(c),
                         interned_str(d), interned_or_none(e))
                for a, b, c, d, e in entry["relations"]
            ),
            relation_diagnostics=tuple(
                Diagnostic.from_row(d) for d in entry["relation_diagnostics"]),
        )
    except (KeyError, TypeError, ValueError, IndexError, UnicodeDecodeError):
        return None


def _layout(text: str, value: Any, has_frontmatter: bool) -> tuple[int, int, int, int] | None:
    """The cached block offsets, checked against the text they claim to describe.

    The delimiter lines must sit exactly where the entry says, and the body line must be the
    number of line breaks before the body plus one: an entry that does not fit is not used.
    """
    raw_start, raw_end, body_start, body_line = (as_int(v) for v in value)
    if not 0 <= raw_start <= raw_end <= body_start <= len(text):
        return None
    if body_line != count_breaks(text[:body_start]) + 1:
        return None
    if has_frontmatter:
        opening = DELIMITER_LINE.match(text, 1 if text.startswith(BOM) else 0)
        closing = DELIMITER_LINE.match(text, raw_end)
        if opening is None or opening.end() != raw_start:
            return None
        if closing is None or closing.end() != body_start:
            return None
    elif raw_start or raw_end or body_start != (1 if text.startswith(BOM) else 0):
        return None
    return raw_start, raw_end, body_start, body_line


def _broken_text(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return ""


def _rules(text: Any, spans: Any, line_count: int) -> FormatRules:
    """The loader's rules, with the Markdown facts read from the entry when it holds them (as
    ``facts_codec.packed_facts`` made them: checked when first decoded), and their sections'
    spans when those fit the file (else they are made from the facts)."""
    if text is not None and not isinstance(text, str | bytes):
        raise TypeError("markdown facts must be JSON text or its frame")
    return document_rules(text, spans if spans_fit(spans, line_count) else None)
