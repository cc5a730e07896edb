"""A query term's part of a search index, kept across restarts.

``context`` keeps each queried stem's part of the scores and ``search_sections`` each queried
term's postings with the snapshot (an LRU per snapshot): a pure function of the snapshot and
the term, and for a term most concepts hold, hundreds of milliseconds of searching every
document. A restarted server on the same files has the same revision, so the part is kept in
the parse cache under that revision (:class:`~bundle_mcp.toolspec.PartStore`) and read back
there instead of computed again. A part is a few integers and compact arrays, stored as their
machine bytes (floats stay bit for bit what was computed).
"""

from __future__ import annotations

import json
import struct
import sys
import threading
from array import array
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Generic, TypeVar

from ..cancel import CancelToken
from ..model import Concepts, Snapshot
from ..toolspec import PartStore

T = TypeVar("T")


class RecentParts(Generic[T]):
    """The parts of the terms a snapshot's queries used last, kept with it: at most ``count``
    of them and ``max_bytes`` of their arrays (``nbytes``), the least recently used let go
    first, never a part the query that puts it is about to read. A part let go is read back
    from the parse cache, or computed, when a query asks for it again: only speed depends on
    what is kept. Bounded by count alone, a long-serving process's parts grew with every
    common word it was asked (about 0.8 MB a stem most concepts hold, 512 stems kept, at
    9,978 concepts)."""

    def __init__(self, count: int, max_bytes: int, nbytes: Callable[[T], int]) -> None:
        self._count, self._max_bytes, self._nbytes = count, max_bytes, nbytes
        self._entries: OrderedDict[str, tuple[T, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, term: str) -> T | None:
        """The term's part when it is kept (now the most recently used), else ``None``."""
        with self._lock:
            found = self._entries.get(term)
            if found is None:
                return None
            self._entries.move_to_end(term)
            return found[0]

    def put(self, parts: Mapping[str, T]) -> None:
        """Keep these parts as the most recently used, then let the oldest others go while
        more than ``count`` or ``max_bytes`` are kept."""
        with self._lock:
            for term, part in parts.items():
                old = self._entries.pop(term, None)
                if old is not None:
                    self._bytes -= old[1]
                size = self._nbytes(part)
                self._entries[term] = (part, size)
                self._bytes += size
            while len(self._entries) > len(parts) and (
                    len(self._entries) > self._count or self._bytes > self._max_bytes):
                _, (_, size) = self._entries.popitem(last=False)
                self._bytes -= size

    def kept_bytes(self) -> int:
        with self._lock:
            return self._bytes


def arrays_nbytes(arrays: Iterable[array[int] | array[float]]) -> int:
    """The machine bytes of some arrays' items."""
    return sum(values.itemsize * len(values) for values in arrays)

_MAGIC = b"bmp1"
_ORDER = b"<" if sys.byteorder == "little" else b">"
_COUNT = struct.Struct("<q")
_ARRAY = struct.Struct("<cBq")  # typecode, item size, length


def packed(numbers: Sequence[int], arrays: Sequence[array[int] | array[float]]) -> bytes:
    """``numbers`` and ``arrays`` as bytes: a header, then each array's machine bytes."""
    pieces = [_MAGIC, _ORDER, _COUNT.pack(len(numbers))]
    pieces.extend(_COUNT.pack(n) for n in numbers)
    pieces.append(_COUNT.pack(len(arrays)))
    for values in arrays:
        pieces.append(_ARRAY.pack(values.typecode.encode("ascii"), values.itemsize,
                                  len(values)))
        pieces.append(values.tobytes())
    return b"".join(pieces)


def unpacked(data: bytes, typecodes: str
             ) -> tuple[list[int], list[array[int] | array[float]]] | None:
    """What :func:`packed` wrote, when it holds arrays of exactly ``typecodes`` written on a
    machine of this byte order and item sizes; otherwise ``None`` (the part is computed)."""
    try:
        if data[:4] != _MAGIC or data[4:5] != _ORDER:
            return None
        at = 5
        (count,) = _COUNT.unpack_from(data, at)
        at += _COUNT.size
        numbers = [_COUNT.unpack_from(data, at + k * _COUNT.size)[0] for k in range(count)]
        at += count * _COUNT.size
        (how_many,) = _COUNT.unpack_from(data, at)
        at += _COUNT.size
        if how_many != len(typecodes):
            return None
        arrays: list[array[int] | array[float]] = []
        for typecode in typecodes:
            code, size, length = _ARRAY.unpack_from(data, at)
            at += _ARRAY.size
            values: array[int] | array[float] = array(typecode)
            end = at + size * length
            if code != typecode.encode("ascii") or size != values.itemsize or end > len(data):
                return None
            values.frombytes(data[at:end])
            arrays.append(values)
            at = end
        if at != len(data):
            return None
        return numbers, arrays
    except struct.error:
        return None


def kept_or_computed(
    parts: PartStore | None,
    revision: str,
    key: str,
    compute: Callable[[], T],
    encode: Callable[[T], bytes],
    decode: Callable[[bytes], T | None],
) -> T:
    """The part kept for ``revision`` and ``key`` when there is one that decodes; otherwise
    computed, and kept for the next process (:func:`kept_or_computed_each` of one name)."""
    return kept_or_computed_each(parts, revision, {key: key}, lambda _names: {key: compute()},
                                 encode, decode)[key]


def kept_or_computed_each(
    parts: PartStore | None,
    revision: str,
    keys: Mapping[str, str],
    compute: Callable[[list[str]], Mapping[str, T]],
    encode: Callable[[T], bytes],
    decode: Callable[[bytes], T | None],
) -> dict[str, T]:
    """:func:`kept_or_computed` for several names at once (``keys``: each name's part key):
    the names with no part that decodes are computed by one call of ``compute`` (one pass over
    the bundle for all of them, where each alone was a pass) and each is kept."""
    found: dict[str, T] = {}
    missing: list[str] = []
    for name, key in keys.items():
        data = parts.read(revision, key) if parts is not None else None
        value = decode(data) if data is not None else None
        if value is None:
            missing.append(name)
        else:
            found[name] = value
    if missing:
        computed = compute(missing)
        for name in missing:
            value = found[name] = computed[name]
            if parts is not None:
                parts.keep(revision, keys[name], encode(value))
    return found


# A whole-bundle value kept as JSON lines (get_semantic_graph's nodes, list_concepts'
# entries): a header, then the items a line at a time.
def packed_lines(header: Any, items: Sequence[Any], per_line: int) -> Iterator[bytes]:
    """``header``, then ``items`` ``per_line`` to a line, as JSON lines made one after the
    other (by the thread that writes them, ``InboundHint.keep_bytes``). ASCII: a path's lone
    surrogate reads back as itself."""
    yield json.dumps(header, separators=(",", ":")).encode("ascii") + b"\n"
    for start in range(0, len(items), per_line):
        yield json.dumps(items[start:start + per_line],
                         separators=(",", ":")).encode("ascii") + b"\n"


def unpacked_lines(data: bytes) -> tuple[Any, Iterator[list[Any]]] | None:
    """What :func:`packed_lines` wrote: the header, and the lines of items, each decoded only
    when reached (decoded at once, the 10,000 nodes' objects and strings of the bench bundle
    raised the memory a restart kept by about 50 MB). The iterator raises ``ValueError`` for
    a line that is not a JSON list; ``None`` when the header does not decode."""
    end = data.find(b"\n")
    try:
        header = json.loads(data[:end]) if end >= 0 else None
    except (UnicodeDecodeError, ValueError):
        return None
    if end < 0:
        return None

    def lines() -> Iterator[list[Any]]:
        at = end + 1
        while at < len(data):
            stop = data.find(b"\n", at)
            if stop < 0:
                raise ValueError("a line cut short")
            try:
                line = json.loads(data[at:stop])
            except UnicodeDecodeError as error:
                raise ValueError("a line not of ASCII") from error
            if not isinstance(line, list):
                raise ValueError("a line not of a list")
            yield line
            at = stop + 1

    return header, lines()


def concept_items(data: bytes | None, decided_by: str, snapshot: Snapshot,
                  token: CancelToken) -> Iterator[tuple[str, dict[str, Any]]] | None:
    """Each concept's item of a value :func:`packed_lines` kept with the header
    ``[decided_by, the number of concepts]``, with the concept's ID, in the concepts' order, a
    line decoded at a time; the item's ``id`` and ``path`` are the snapshot's own strings (not
    copies). ``None`` when nothing is kept or the header does not fit; the iterator raises
    ``ValueError`` when the items are not one a concept, in order, each an object."""
    found = None if data is None else unpacked_lines(data)
    concepts = snapshot.concepts
    if found is None or found[0] != [decided_by, len(concepts)]:
        return None
    lines = found[1]
    paths: Mapping[str, str] = concepts.paths if isinstance(concepts, Concepts) else {}

    def items() -> Iterator[tuple[str, dict[str, Any]]]:
        ids = iter(concepts)
        for line in lines:
            token.check()
            for item in line:
                concept_id = next(ids, None)
                if concept_id is None or type(item) is not dict or item.get("id") != concept_id:
                    raise ValueError("not one item a concept, in order")
                item["id"] = concept_id
                path = paths.get(concept_id)
                if path is not None and item.get("path") == path:
                    item["path"] = path
                yield concept_id, item
        if next(ids, None) is not None:
            raise ValueError("fewer items than concepts")

    return items()
