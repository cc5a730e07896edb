"""A query term's part of an index (context's stem parts of the scores, search_sections'
postings) is kept in the parse cache under the snapshot's revision: a restarted server on the
same files reads it back instead of searching every document again, and answers byte for byte
as the process that computed it. Work counters, no timing: each test counts the parts computed.
"""

from __future__ import annotations

import itertools
import math
import sqlite3
import threading
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from bundle_mcp import derived, zstd_frames
from bundle_mcp.cancel import CancelToken
from bundle_mcp.dispatch import Dispatcher, ServeConfig
from bundle_mcp.loader import parse_cache
from bundle_mcp.loader.parse_cache import KeptParts, ParseCache
from bundle_mcp.readers import ALL_READER
from bundle_mcp.readiness import Readiness
from bundle_mcp.snapshots import SnapshotCache
from bundle_mcp.tools import _context_index, _section_index
from bundle_mcp.tools._kept_parts import RecentParts, arrays_nbytes, packed, unpacked

if TYPE_CHECKING:  # fixtures' types only; pytest provides the objects
    from conftest import BundleFactory

WORDS = ["cache", "caching", "download", "prune", "install", "folder", "mirror", "binary"]
# (tool, arguments, the parts its first call computes: distinct terms or stems)
CALLS = [
    ("context", {"question": "how do I prune the download cache"}, 3),
    ("search_sections", {"query": "prune cache"}, 2),
]


def pages(count: int = 30) -> dict[str, str]:
    files = {"index.md": "---\ntype: Index\ntitle: Home\n---\n# Home\n"}
    for n in range(count):
        a, b, c = WORDS[n % 8], WORDS[(3 * n + 1) % 8], WORDS[(5 * n + 2) % 8]
        files[f"f{n % 3}/p{n}.md"] = (
            f"---\ntype: Guide\ntitle: {a.title()} {n}\ndescription: How to {b} the {c}\n---\n"
            f"# Page {n}\n\nThe {a} and the {b} keep the {a} {c}.\n\n## {b.title()}\n\n"
            f"{c} {c} {a}, then {b}. Ünïcode {a} café.\n")
    return files


class Counted:
    """Counts the parts each tool computes (its terms' postings, its stems' parts)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.computed: list[str] = []
        real_terms, real_postings = _context_index._term_scores, _section_index._postings

        def terms(snapshot: Any, term: str, token: Any) -> Any:
            self.computed.append(term)
            return real_terms(snapshot, term, token)

        def postings(snapshot: Any, terms: list[str], token: Any) -> Any:
            self.computed.extend(terms)  # one pass makes every missing term's postings
            return real_postings(snapshot, terms, token)

        monkeypatch.setattr(_context_index, "_term_scores", terms)
        monkeypatch.setattr(_section_index, "_postings", postings)


def serve(bundle: str, cache: Path | None) -> tuple[Dispatcher, ParseCache]:
    """A server process's dispatcher, warmed (the warm-up saves: that starts the database)."""
    parse = ParseCache(cache)
    dispatcher = Dispatcher(ServeConfig(bundles=(bundle,)),
                            cache=SnapshotCache(parse_cache=parse, watch=False))
    readiness = Readiness(dispatcher, follow=False)
    readiness.start()
    assert readiness.wait(120)
    readiness.stop(wait=10)
    parse.settle_parts()  # its save wrote the answers its warm-up kept before it
    return dispatcher, parse


def answer(dispatcher: Dispatcher, tool: str, arguments: dict[str, Any]) -> str:
    outcome = dispatcher.call(tool, arguments)
    assert not outcome.is_error, outcome.structured
    return outcome.text


# The query terms' parts; the table also keeps the warm-up's answers and whole-bundle values.
TERM_PARTS = (_context_index.TERM_PART, _section_index.POSTINGS_PART)


def parts_rows(cache: Path) -> list[tuple[str, str]]:
    """The query terms' parts."""
    (database,) = (cache / "parse").glob("*.sqlite3")
    with sqlite3.connect(database) as db:
        return [(revision, key) for revision, key
                in db.execute("SELECT revision, key FROM parts ORDER BY rowid")
                if key.startswith(TERM_PARTS)]


@pytest.mark.parametrize(("tool", "arguments", "parts"), CALLS, ids=[c[0] for c in CALLS])
def test_a_restart_on_the_same_files_reads_each_part_back(
    tmp_bundle: BundleFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    tool: str, arguments: dict[str, Any], parts: int,
) -> None:
    bundle, cache = tmp_bundle(pages()), tmp_path / "cache"
    counted = Counted(monkeypatch)
    first, parse = serve(bundle, cache)
    expected = answer(first, tool, arguments)
    assert len(counted.computed) == parts
    parse.settle_parts()
    assert len(parts_rows(cache)) == parts

    counted.computed.clear()
    restarted, _ = serve(bundle, cache)
    assert answer(restarted, tool, arguments) == expected
    assert counted.computed == []  # every part read back, none computed
    assert answer(restarted, tool, arguments) == expected  # then kept with the snapshot
    assert counted.computed == []


@pytest.mark.parametrize(("tool", "arguments", "parts"), CALLS, ids=[c[0] for c in CALLS])
def test_after_a_change_the_parts_are_computed_for_the_new_revision(
    tmp_bundle: BundleFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    tool: str, arguments: dict[str, Any], parts: int,
) -> None:
    """A part names concepts by their place in one snapshot and counts with its statistics:
    another revision never reads it."""
    bundle, cache = tmp_bundle(pages()), tmp_path / "cache"
    first, parse = serve(bundle, cache)
    answer(first, tool, arguments)
    parse.settle_parts()
    Path(bundle, "f0/p0.md").unlink()  # every later concept moves up one place
    Path(bundle, "f1/new.md").write_text(
        "---\ntype: Guide\ntitle: New\n---\n# New\n\nPrune the cache, prune it again.\n",
        encoding="utf-8")

    counted = Counted(monkeypatch)
    restarted, parse = serve(bundle, cache)
    got = answer(restarted, tool, arguments)
    assert len(counted.computed) == parts
    uncached, _ = serve(bundle, None)
    assert got == answer(uncached, tool, arguments)
    parse.settle_parts()
    assert len({revision for revision, _ in parts_rows(cache)}) == 2


@pytest.mark.parametrize(("tool", "arguments", "parts"), CALLS, ids=[c[0] for c in CALLS])
def test_a_damaged_part_is_computed_again(
    tmp_bundle: BundleFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    tool: str, arguments: dict[str, Any], parts: int,
) -> None:
    bundle, cache = tmp_bundle(pages()), tmp_path / "cache"
    first, parse = serve(bundle, cache)
    expected = answer(first, tool, arguments)
    parse.settle_parts()
    (database,) = (cache / "parse").glob("*.sqlite3")
    with sqlite3.connect(database) as db:
        values = [(rowid, value) for rowid, key, value
                  in db.execute("SELECT rowid, key, value FROM parts ORDER BY rowid")
                  if key.startswith(TERM_PARTS)]
        broken = [b"not a frame", zstd_frames.packed(b"bmp1 not a part"),
                  zstd_frames.packed(zstd_frames.unpacked(values[-1][1])[:-8])]  # cut short
        for (rowid, _), value in zip(values, broken, strict=False):
            db.execute("UPDATE parts SET value = ? WHERE rowid = ?", (value, rowid))

    counted = Counted(monkeypatch)
    restarted, parse = serve(bundle, cache)
    assert answer(restarted, tool, arguments) == expected
    assert len(counted.computed) == min(parts, len(broken))
    parse.settle_parts()

    counted.computed.clear()  # the computed parts replaced the damaged rows
    again, _ = serve(bundle, cache)
    assert answer(again, tool, arguments) == expected
    assert counted.computed == []


def test_only_the_newest_parts_are_kept(
    tmp_bundle: BundleFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(parse_cache, "MAX_PARTS", 3)
    bundle, cache = tmp_bundle(pages()), tmp_path / "cache"
    dispatcher, parse = serve(bundle, cache)
    for word in WORDS[:5]:
        answer(dispatcher, "search_sections", {"query": word})
        parse.settle_parts()
    keys = [key.rsplit("/", 1)[1] for _, key in parts_rows(cache)]
    assert keys == WORDS[2:5]


def test_a_whole_bundle_value_replaces_the_one_kept_for_other_files(
    tmp_bundle: BundleFactory, tmp_path: Path
) -> None:
    """Packed whole-bundle values (megabytes each) are kept for the newest revision only: a
    restart on changed files replaces them, so restarts after edits do not fill the cache."""
    bundle, cache = tmp_bundle(pages()), tmp_path / "cache"
    serve(bundle, cache)
    Path(bundle, "p1.md").write_text("---\ntitle: Changed\n---\n# Changed\n\nNew words.\n")
    serve(bundle, cache)
    (database,) = (cache / "parse").glob("*.sqlite3")
    with sqlite3.connect(database) as db:
        packed_rows = list(db.execute("SELECT key, count(DISTINCT revision) FROM parts"
                                      " WHERE key LIKE ? GROUP BY key",
                                      (f"{parse_cache.BYTES_PART}%",)))
        other = db.execute("SELECT count(DISTINCT revision) FROM parts WHERE key NOT LIKE ?",
                           (f"{parse_cache.BYTES_PART}%",)).fetchone()[0]
    assert len(packed_rows) >= 3  # the body words, the context words and their holders
    assert {count for _, count in packed_rows} == {1}
    assert other == 2  # the small values of both revisions stay, as before


def test_a_warm_server_has_written_the_parts_its_warm_up_kept(
    tmp_bundle: BundleFactory, tmp_path: Path
) -> None:
    """A cold warm-up's whole-bundle values wait for its first save; the save then waits for
    their writes before the server says it is warm, so that none competes with the calls
    that follow (they cost the first calls after ready half again, context's words above all)."""
    bundle, cache = tmp_bundle(pages()), tmp_path / "cache"
    parse = ParseCache(cache)
    dispatcher = Dispatcher(ServeConfig(bundles=(bundle,)),
                            cache=SnapshotCache(parse_cache=parse, watch=False))
    readiness = Readiness(dispatcher, follow=False)
    readiness.start()
    try:
        assert readiness.wait(120)
        (database,) = (cache / "parse").glob("*.sqlite3")
        with sqlite3.connect(database) as db:
            keys = {key for (key,) in db.execute("SELECT key FROM parts")}
    finally:
        readiness.stop(wait=10)
    assert {f"{parse_cache.BYTES_PART}context-words/stems",
            f"{parse_cache.BYTES_PART}context-words/0",
            f"{parse_cache.BYTES_PART}body-words"} <= keys


@dataclass(frozen=True)
class FirstProcess:
    """A process serving a bundle whose parse cache has no database yet, and its parts."""

    bundle: str
    parse: ParseCache
    dispatcher: Dispatcher
    store: KeptParts

    @classmethod
    def on(cls, bundle: str, cache: Path) -> FirstProcess:
        parse = ParseCache(cache)
        dispatcher = Dispatcher(ServeConfig(bundles=(bundle,)),
                                cache=SnapshotCache(parse_cache=parse, watch=False))
        store = parse.parts(bundle)
        assert store is not None
        return cls(bundle, parse, dispatcher, store)

    def save(self) -> None:
        """The first save (it makes the database), then the waiting parts' writes."""
        self.dispatcher.save_parse_cache(
            self.bundle, self.dispatcher.served_snapshot(self.bundle, CancelToken(), ALL_READER))
        self.parse.settle_parts()


def test_a_part_kept_before_the_database_exists_waits_for_the_first_save(
    tmp_bundle: BundleFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A database holds one bundle's rows, which a save names in ``meta``: a part alone never
    starts one (the bundle's rows would then be a stranger's). A first warm-up keeps its
    answers before its save: they wait for it, a bounded number of them."""
    monkeypatch.setattr(parse_cache, "MAX_WAITING_PARTS", 2)
    first = FirstProcess.on(tmp_bundle(pages()), tmp_path / "cache")
    store = first.store
    for key in ("one", "two", "three"):
        store.keep("revision", key, key.encode())
    first.parse.settle_parts()
    assert not list((tmp_path / "cache" / "parse").glob("*.sqlite3"))
    assert store.read("revision", "one") is None
    first.save()
    assert [store.read("revision", key) for key in ("one", "two", "three")] == [
        b"one", b"two", None]
    assert ParseCache(None).parts(first.bundle) is None  # the cache off: nothing is kept


def test_a_part_waiting_for_the_first_save_is_held_compressed(
    tmp_bundle: BundleFactory, tmp_path: Path
) -> None:
    """A cold warm-up keeps megabytes of whole-bundle values long before its save makes the
    database: each waits as its compressed frame, not whole, and is written as kept."""
    first = FirstProcess.on(tmp_bundle(pages()), tmp_path / "cache")
    store = first.store
    value = b"the same words again " * 50_000  # 1 MB that compresses well
    store.keep("revision", "whole", value)
    store.keep("revision", "pieces", iter([b"made ", b"as written"]))
    (waiting,) = first.parse._waiting_parts.values()
    held = [arg for write in waiting for arg in write.args if isinstance(arg, bytes)]
    assert held and all(len(arg) < len(value) // 10 for arg in held)  # the frame, not the value
    assert zstd_frames.unpacked(held[0]) == value
    first.save()
    assert store.read("revision", "whole") == value
    assert store.read("revision", "pieces") == b"made as written"


def test_the_parts_waiting_for_the_first_save_are_written_by_one_thread(
    tmp_bundle: BundleFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cold warm-up's whole-bundle parts all wait for its save: written then by one thread,
    one after the other, in the order kept (a thread each gave most of them a malloc arena
    of its own, whose freed buffers stayed resident: about 90 MiB at 9,978 concepts)."""
    first = FirstProcess.on(tmp_bundle(pages()), tmp_path / "cache")
    keys = [f"part-{n}" for n in range(6)]
    for key in keys:
        first.store.keep("revision", key, iter([key.encode(), b" pieces"]))
    writers: list[str] = []
    written: list[str] = []
    real_start, real_store = ParseCache._start_part_write, KeptParts._store

    def counted(self: ParseCache, write: Callable[[], None]) -> None:
        writers.append(threading.current_thread().name)
        real_start(self, write)

    def stored(self: KeptParts, revision: str, key: str, compressed: bytes, **kw: Any) -> None:
        written.append(key)
        real_store(self, revision, key, compressed, **kw)

    monkeypatch.setattr(ParseCache, "_start_part_write", counted)
    monkeypatch.setattr(KeptParts, "_store", stored)
    first.save()
    assert len(writers) == 1 and written == keys
    assert [first.store.read("revision", key) for key in keys] == [
        f"{key} pieces".encode() for key in keys]


def test_packed_arrays_come_back_bit_for_bit() -> None:
    floats = array("d", [0.0, -0.0, 1e-300, 5e-324, math.pi, math.inf, -math.inf, math.nan])
    ints = array("i", [0, 1, -1, 2**31 - 1, -(2**31)])
    data = packed((7, -3), (ints, floats, array("i")))
    found = unpacked(data, "idi")
    assert found is not None
    numbers, (ints_back, floats_back, empty) = found
    assert numbers == [7, -3]
    assert ints_back == ints and len(empty) == 0
    assert floats_back.tobytes() == floats.tobytes()  # NaN and -0.0 included
    assert unpacked(data, "iii") is None  # another layout
    assert unpacked(data, "id") is None
    assert unpacked(data[:-1], "idi") is None  # cut short
    assert unpacked(data + b"\0", "idi") is None  # something after
    assert unpacked(b"", "idi") is None


def test_a_part_that_meets_a_save_holding_the_database_is_written_after_it(
    tmp_bundle: BundleFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A save at the file cap holds the database for seconds, past a part write's busy
    timeout: a cold warm-up's whole-bundle values kept meanwhile were dropped. Such a write is
    tried once more when the save under way ends."""
    monkeypatch.setattr(parse_cache, "BUSY_TIMEOUT_MS", 50)
    bundle, cache = tmp_bundle(pages()), tmp_path / "cache"
    parse = ParseCache(cache)
    dispatcher = Dispatcher(ServeConfig(bundles=(bundle,)),
                            cache=SnapshotCache(parse_cache=parse, watch=False))
    snapshot = dispatcher.served_snapshot(bundle, CancelToken(), ALL_READER)
    dispatcher.save_parse_cache(bundle, snapshot)
    store = parse.parts(bundle)
    assert store is not None
    (database,) = (cache / "parse").glob("*.sqlite3")
    saving = parse._saving(database)  # held by this process's save while it runs
    with saving, sqlite3.connect(database, isolation_level=None) as held:
        held.execute("BEGIN IMMEDIATE")  # as the save's transaction holds the database
        store.keep("revision", "kept during the save", b"value")
        # Ten busy timeouts: the write has met the lock and now waits for the save to end
        # (without the retry it has given up by then, and the assertion below fails).
        threading.Event().wait(0.5)
        held.execute("COMMIT")
    parse.settle_parts()
    assert store.read("revision", "kept during the save") == b"value"
    # Locked by another process (no save of this one under way): tried once more, then left.
    with sqlite3.connect(database, isolation_level=None) as held:
        held.execute("BEGIN IMMEDIATE")
        store.keep("revision", "kept while another process writes", b"value")
        parse.settle_parts()
        held.execute("COMMIT")
    assert store.read("revision", "kept while another process writes") is None


def test_parts_are_read_through_one_connection_opened_again_for_a_replaced_database(
    tmp_bundle: BundleFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Opening a connection cost about 2 ms a read, paid by every stem of a new question: the
    reads share one, and a database replaced at its path (a corrupt one is) is read anew."""
    bundle, cache = tmp_bundle(pages()), tmp_path / "cache"
    _, parse = serve(bundle, cache)
    (database,) = (cache / "parse").glob("*.sqlite3")
    kept = parse.parts(bundle)
    assert kept is not None
    kept.keep("rev", "a", b"first")
    parse.settle_parts()
    opened: list[str] = []
    real_connect = sqlite3.connect

    def connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        opened.append(str(args[0]))
        return real_connect(*args, **kwargs)

    monkeypatch.setattr(parse_cache.sqlite3, "connect", connect)
    reads = [kept.read("rev", key) for key in ("a", "b", "a")]
    assert reads == [b"first", None, b"first"]
    assert len(opened) == 1

    # Another database at the path: a copy with the row changed, moved into place.
    replacement = database.with_suffix(".new")
    with real_connect(database) as db:
        db.execute("VACUUM INTO ?", (str(replacement),))
    with real_connect(replacement) as db:
        db.execute("UPDATE parts SET value = ? WHERE key = 'a'", (zstd_frames.packed(b"second"),))
    replacement.replace(database)
    assert kept.read("rev", "a") == b"second"
    assert len(opened) == 2
    database.unlink()
    assert kept.read("rev", "a") is None


def test_a_writer_empties_the_log_though_a_reader_stays_open(
    tmp_bundle: BundleFactory, tmp_path: Path,
) -> None:
    """Only the last connection to close empties SQLite's write-ahead log, and this process
    keeps reading connections open: a first save's log (the whole database) stayed beside it
    and the next process read it all back. Each writer now empties it as it closes."""
    bundle, cache = tmp_bundle(pages()), tmp_path / "cache"
    dispatcher, parse = serve(bundle, cache)
    (database,) = (cache / "parse").glob("*.sqlite3")
    log = database.with_name(database.name + "-wal")
    kept = parse.parts(bundle)
    assert kept is not None
    kept.read("rev", "a")  # the kept reading connection is open from now on
    Path(bundle, "f1/new.md").write_text("---\ntype: Guide\n---\n# New\n\nText.\n",
                                         encoding="utf-8")
    snapshot = dispatcher.served_snapshot(bundle, CancelToken(), ALL_READER)
    assert "f1/new.md" in snapshot.documents
    snapshot.documents["f1/new.md"]  # noqa: B018 (built, so the save writes its row)
    parse.save(bundle, snapshot.documents)
    kept.keep("rev", "b", b"part")
    parse.settle_parts()
    assert kept.read("rev", "b") == b"part"
    assert not log.exists() or log.stat().st_size == 0


def test_recent_parts_are_bounded_by_count_and_bytes_and_keep_what_a_query_reads() -> None:
    recent: RecentParts[array[int]] = RecentParts(3, 40, arrays_nbytes_of_one)
    recent.put({"a": array("i", [1] * 4), "b": array("i", [2] * 4)})  # 16 bytes each
    assert recent.get("a") is not None and recent.kept_bytes() == 32
    recent.put({"c": array("i", [3] * 4)})  # 48 bytes: b, the least recently used, goes
    assert recent.get("b") is None and recent.get("a") is not None
    assert recent.kept_bytes() == 32
    recent.put({"d": array("i", [4] * 30)})  # over the bytes alone: kept, the others go
    assert recent.get("d") is not None and recent.get("a") is None and recent.get("c") is None
    assert recent.kept_bytes() == 120
    recent.put({"e": array("i", [5]), "f": array("i", [6]), "g": array("i", [7]),
                "h": array("i", [8])})  # over the count alone: every one of them kept
    assert [recent.get(t) is not None for t in "defgh"] == [False, True, True, True, True]


def arrays_nbytes_of_one(values: array[int]) -> int:
    return arrays_nbytes((values,))


def test_kept_parts_stay_within_their_bytes_and_answers_do_not_change(
    tmp_bundle: BundleFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With room for about one part, every question still gets the answer a server that
    keeps them all gives: a part let go is computed again."""
    bundle = tmp_bundle(pages())
    questions = [("context", {"question": f"how do I {a} the {b}"})
                 for a, b in zip(WORDS, reversed(WORDS), strict=True)]
    questions += [("search_sections", {"query": f"{a} {b}"})
                  for a, b in itertools.pairwise(WORDS)]
    roomy = Dispatcher(ServeConfig(bundles=(bundle,)))
    expected = [roomy.call(tool, {"bundle_path": bundle, **args}).text
                for tool, args in questions * 2]
    monkeypatch.setattr(_context_index, "TERMS_KEPT_BYTES", 64)
    monkeypatch.setattr(_section_index, "POSTINGS_KEPT_BYTES", 64)
    counted = Counted(monkeypatch)
    tight = Dispatcher(ServeConfig(bundles=(bundle,)))
    got = [tight.call(tool, {"bundle_path": bundle, **args}).text
           for tool, args in questions * 2]
    assert got == expected
    snapshot = tight.served_snapshot(bundle, CancelToken(), ALL_READER)
    terms = _context_index._index_part(snapshot, "terms", _context_index._TermCache,
                                       CancelToken())
    kept = derived.built_value(snapshot, _section_index.SECTION_POSTINGS)
    assert kept is not None
    # Only the last question's parts stay (each is over 64 bytes on its own) ...
    assert len(terms._recent._entries) <= 3 and len(kept._recent._entries) == 2
    # ... so the second round computed its parts again.
    assert len(counted.computed) > len(set(counted.computed))
