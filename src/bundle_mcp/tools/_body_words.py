"""search_concepts' body word index: each word of the bundle's folded bodies → the concepts whose
body holds it, so that a query checks ``needle in body`` on the few concepts that can hold the
needle instead of on every body (52.6 million characters at the bench size).

A *word* is a maximal run of word characters (``\\w`` of :mod:`re`: one code point at a time),
so the argument below holds for any text. If the needle occurs in a body, each maximal run of
word characters in the needle lies inside one word of that body: the whole word when the run is
bounded by non-word characters on both sides within the needle, its end when the run starts the
needle, its start when the run ends the needle, anywhere in it when the run is the whole needle.
The concepts of the words that fit are therefore a superset of the bodies holding the needle,
and intersecting the sets of several runs keeps it one. The exact ``in`` check on those
candidates stays the arbiter, so answers are the plain scan's, byte for byte.

The words are looked up in one joined vocabulary (``"\\n" + "\\n".join(words) + "\\n"``, the
separator being no word character), so the four cases are one ``str.find`` each: ``\\nrun\\n``
(a whole word), ``run\\n`` (a word's end), ``\\nrun`` (its start), ``run`` (anywhere). A run that
fits too many words (:data:`MAX_WORDS_PER_RUN`: a short one) or whose words are in half the
concepts or more (a common one) does not narrow, since checking that many bodies one by one
costs more than the scan in C; it is passed over. A needle with no run that narrows (only
spaces or punctuation, one or two letters, common words) is answered by the scan. A needle that
is one run of word characters is the exception: the bodies holding it are exactly those with a
word that fits it, so the index alone answers it, however common (``BodyWordIndex.holders``).

The index is kept per snapshot and built by the warm-up, never by a call: a call uses it when it
is there (``derived.kept``) and scans otherwise, since the build costs about a hundred scans
(1.3 s at the bench size on a quiet machine). After a file change it is updated from its
predecessor's index: only the changed concepts' postings are touched (:func:`updated_index`),
their earlier words found in the postings themselves (their earlier text may be gone).

A built index is also kept in the parse cache under the snapshot's revision
(:func:`packed_index`; ``model.InboundHint.keep_bytes``), so a restarted server on the same
files reads it back (about a tenth of a scan) instead of building it: its warm-up does, and so
does a call that finds the index not built yet (:func:`kept_index`). The index's numbers are
its own, so any numbering read back is right as long as it names exactly the snapshot's
concepts; the bytes read back are checked whole (:func:`unpacked_index`), else it is built.
"""

from __future__ import annotations

import json
import re
import struct
import sys
from array import array
from bisect import bisect_left, bisect_right
from collections import defaultdict
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass
from itertools import accumulate, islice

from ..cancel import CancelToken
from ..derived import Slot, kept, kept_earlier, of_snapshot
from ..model import Document, Snapshot

__all__ = ["BODY_WORDS", "SLOTS", "STORED_NAME", "BodyWordIndex", "body_words", "build_index",
           "concept_words", "index_of", "kept_index", "packed_index", "unpacked_index",
           "updated_index"]

_WORD = re.compile(r"\w+")
# ASCII text's non-word characters, each to a space: then ``str.split`` cuts exactly the runs of
# ``\w`` (for ASCII, \w is letters, digits and ``_``), about three times as fast as ``findall``.
# Capitals to their lowercase in the same pass: an ASCII body's fold is its lowercase, so the
# words of a body not folded first are those of its fold (bodies are not kept folded).
_ASCII_NON_WORD = str.maketrans(
    {c: " " for c in map(chr, range(128)) if not (c.isalnum() or c == "_")}
    | {c: c.lower() for c in map(chr, range(128)) if c.isupper()}
)
_SEP = "\n"  # no word character: joins the vocabulary
# Past this many vocabulary words fitting one run, the run is passed over: finding them all
# costs more than it saves, and so many words seldom leave few concepts.
MAX_WORDS_PER_RUN = 512
# Candidates at or below this many are checked without narrowing by the needle's other runs.
FEW_CANDIDATES = 16
# Postings per concept that ``BodyWordIndex.holders`` joins at most: joining 100,000 numbers
# took 2 ms at the bench size, where a scan of every body takes 25 to 60.
HOLDER_POSTINGS = 16
# An update touches each changed concept's words; past this share of the concepts changed,
# building the index anew is as quick.
MAX_UPDATED_SHARE = 0.1
# Up to this many concepts changed, an update looks each of their numbers up in each posting
# (bisect); more are taken out in one pass over every posting.
FEW_REMOVED = 4
# Concept numbers below this fit an unsigned 16-bit posting ("H"); larger bundles use "I".
_SHORT_LIMIT = 1 << 16


def body_words(body: str) -> set[str]:
    """The distinct words (maximal runs of ``\\w``) of a folded body."""
    if body.isascii():
        return set(body.translate(_ASCII_NON_WORD).split())
    return set(_WORD.findall(body))


def concept_words(doc: Document) -> set[str]:
    """The distinct words of the document's folded body (:func:`body_words`), without a folded
    copy of an ASCII body: the translation lowercases it as it cuts."""
    kept = doc.kept_folded_body
    return body_words(doc.body if kept is None else kept)


@dataclass(frozen=True, slots=True)
class BodyWordIndex:
    """Which concepts' folded bodies hold each word.

    Concepts are numbered by the index, not by their place in the snapshot: an update keeps the
    numbers of the concepts it does not touch (a removed concept's number is given to the next
    added one). Postings are sorted arrays of those numbers, shared with the predecessor's index
    for every word an update did not touch.
    """

    postings: Mapping[str, array[int]]  # word → sorted numbers of the concepts holding it
    concepts: tuple[str | None, ...]  # number → concept ID (None: a free number)
    numbers: Mapping[str, int]  # concept ID → number
    words: tuple[str, ...]  # the vocabulary, in the order of ``vocabulary``
    vocabulary: str  # "\n" + "\n".join(words) + "\n"
    starts: array[int]  # where each word starts in ``vocabulary``
    typecode: str  # of every posting: "H" below 65,536 numbers, else "I"

    def candidates(self, needle: str, *, every: bool = False) -> set[str] | None:
        """The concepts whose body may hold ``needle`` (a superset of those that do), or
        ``None`` when no run of the needle narrows them (then every body is to be checked).

        A run whose words are in half the concepts or more does not narrow, unless ``every``:
        a caller that works through each candidate's body anyway (search_sections' postings)
        gains from any narrowing, where search_concepts' scan in C is quicker than checking
        that many bodies one by one."""
        runs = {_pattern(needle, match.start(), match.end()) for match in _WORD.finditer(needle)}
        found: set[int] | None = None
        # Past half the concepts, checking them one by one costs more than the scan.
        budget = sys.maxsize if every else len(self.numbers) // 2 + 1
        # The longest patterns first: they fit the fewest words.
        for pattern in sorted(runs, key=lambda p: (-len(p), p)):
            if found is not None and len(found) <= FEW_CANDIDATES:
                break
            holding = self._holding(pattern, budget)
            if holding is None:
                continue
            found = holding if found is None else found & holding
        if found is None:
            return None
        concepts = self.concepts
        return {concept for n in found if (concept := concepts[n]) is not None}

    def holders(self, needle: str) -> set[str] | None:
        """Exactly the concepts whose folded body holds ``needle`` when the needle is one run
        of word characters: it then lies inside one word of any body holding it, and a body
        with a word holding it holds it, so no body is to be checked, however common the
        needle. ``None`` for any other needle, or when too many words fit it or their postings
        pass :data:`HOLDER_POSTINGS` a concept (then joining them costs as much as a scan)."""
        if _WORD.fullmatch(needle) is None:
            return None
        found = self._holding(needle, HOLDER_POSTINGS * len(self.numbers) + 1)
        if found is None:
            return None
        concepts = self.concepts
        return {concept for n in found if (concept := concepts[n]) is not None}

    def _holding(self, pattern: str, budget: int) -> set[int] | None:
        """The numbers of the concepts with a word that fits ``pattern`` (module docstring);
        ``None`` when too many words fit, or their postings reach ``budget`` numbers."""
        if pattern.startswith(_SEP) and pattern.endswith(_SEP):
            numbers = self.postings.get(pattern[1:-1])
            if numbers is None:
                return set()
            return set(numbers) if len(numbers) < budget else None
        fitting: list[array[int]] = []
        total = 0
        text, starts, words = self.vocabulary, self.starts, self.words
        at = text.find(pattern)
        while at >= 0:
            if len(fitting) >= MAX_WORDS_PER_RUN:
                return None
            n = bisect_right(starts, at) - 1
            if pattern.startswith(_SEP):  # the separator before word n belongs to it
                n += 1
            numbers = self.postings[words[n]]
            total += len(numbers)
            if total >= budget:
                return None
            fitting.append(numbers)
            # The next fitting word starts after this one's end.
            at = text.find(pattern, starts[n] + len(words[n]))
        found: set[int] = set()
        for numbers in fitting:
            found.update(numbers)
        return found

    def size_bytes(self) -> int:
        """The postings' and vocabulary's own bytes (without the mappings' and words' objects):
        what the index adds beyond a dictionary of the bundle's words."""
        postings = sum(numbers.itemsize * len(numbers) for numbers in self.postings.values())
        return postings + len(self.vocabulary) + self.starts.itemsize * len(self.starts)


def _pattern(needle: str, start: int, end: int) -> str:
    """What a run at ``needle[start:end]`` looks like in the vocabulary (module docstring)."""
    before = _SEP if start > 0 else ""
    after = _SEP if end < len(needle) else ""
    return f"{before}{needle[start:end]}{after}"


def _index(
    postings: Mapping[str, array[int]], concepts: tuple[str | None, ...],
    numbers: Mapping[str, int], typecode: str,
) -> BodyWordIndex:
    words = tuple(postings)
    vocabulary = f"{_SEP}{_SEP.join(words)}{_SEP}"
    # Word n starts after the separators before it and the words before it.
    starts = array("I", accumulate(map((1).__add__, map(len, words[:-1])), initial=1)) \
        if words else array("I")
    return BodyWordIndex(postings, concepts, numbers, words, vocabulary, starts, typecode)


def _typecode(count: int) -> str:
    return "H" if count < _SHORT_LIMIT else "I"


def build_index(snapshot: Snapshot, token: CancelToken) -> BodyWordIndex:
    """The index of every concept of ``snapshot``, numbered in concept ID order."""
    code = _typecode(len(snapshot.concepts))
    # Arrays from the start, not lists turned into arrays: a list holds 8 bytes per number
    # (2.9 million numbers at the bench size: 23 MiB more at the build's peak).
    postings: defaultdict[str, array[int]] = defaultdict(lambda: array(code))
    for n, doc in enumerate(snapshot.concepts.values()):
        token.check()
        for word in concept_words(doc):
            postings[word].append(n)
    concepts = tuple(snapshot.concepts)
    return _index(dict(postings), concepts, {c: n for n, c in enumerate(concepts)}, code)


def updated_index(
    earlier: BodyWordIndex, before: Snapshot, after: Snapshot, token: CancelToken
) -> BodyWordIndex | None:
    """``after``'s index from ``before``'s (``earlier``), touching only the concepts whose
    document differs between the two; it finds the same candidates as :func:`build_index` of
    ``after``. ``None`` when too much changed to gain anything (the caller builds it anew)."""
    old, new = before.concepts, after.concepts
    changed = [c for c in old if new.get(c) is not old[c]]
    changed.extend(c for c in new if c not in old)
    if len(changed) > max(1, int(max(len(old), len(new)) * MAX_UPDATED_SHARE)):
        return None
    postings = dict(earlier.postings)
    concepts = list(earlier.concepts)
    numbers = dict(earlier.numbers)
    # Removed first, then added: a changed concept is both, and keeps its number. Its words
    # are found in the postings, not in its old text: that text is read back from its file
    # (packed_text.FileText), which holds the new one now, or is gone.
    removed = {numbers[concept_id] for concept_id in changed if concept_id in old}
    _without(postings, removed, token)
    for concept_id in changed:
        if concept_id in old and concept_id not in new:
            concepts[numbers.pop(concept_id)] = None
    free = [n for n, concept_id in enumerate(concepts) if concept_id is None]
    free.reverse()  # the smallest free number first
    code = earlier.typecode
    if _typecode(len(concepts) + len(changed)) != code:
        return None  # the numbers may outgrow the postings' type
    for concept_id in changed:
        token.check()
        if concept_id not in new:
            continue
        number = numbers.get(concept_id)
        if number is None:
            number = free.pop() if free else len(concepts)
            if number == len(concepts):
                concepts.append(None)
            concepts[number] = concept_id
            numbers[concept_id] = number
        for word in concept_words(new[concept_id]):
            _with(postings, word, number, code)
    return _index(postings, tuple(concepts), numbers, code)


def _without(postings: dict[str, array[int]], removed: set[int], token: CancelToken) -> None:
    """Take the numbers ``removed`` out of every posting (a word no number holds any more goes),
    looking through the whole vocabulary: about 13 ms for one number at the bench size (50,000
    words), and no more than a pass over every posting in C for many."""
    if not removed:
        return
    few = sorted(removed) if len(removed) <= FEW_REMOVED else None
    for k, (word, numbers) in enumerate(list(postings.items())):
        if not k % 4096:
            token.check()
        if few is not None:
            if not any((at := bisect_left(numbers, n)) < len(numbers) and numbers[at] == n
                       for n in few):
                continue
        elif removed.isdisjoint(numbers):
            continue
        # A new array: the old one is shared with the predecessor's index.
        kept = array(numbers.typecode, (n for n in numbers if n not in removed))
        if kept:
            postings[word] = kept
        else:
            del postings[word]


def _with(postings: dict[str, array[int]], word: str, n: int, code: str) -> None:
    numbers = postings.get(word)
    if numbers is None:
        postings[word] = array(code, (n,))
        return
    at = bisect_left(numbers, n)
    postings[word] = numbers[:at] + array(code, (n,)) + numbers[at:]


# The name a revision's index is kept under (InboundHint.keep_bytes); the packing's version is
# in its magic.
STORED_NAME = "body-words"
_MAGIC = b"bmw1" + (b"L" if sys.byteorder == "little" else b"B")
_HEADER = struct.Struct("<QQQ")  # the names' JSON length, the number of words, of numbers


def packed_index(index: BodyWordIndex) -> bytes:
    """The index as bytes: its concepts and words (JSON), each word's posting length, then
    every posting, one after the other, in the vocabulary's order."""
    names = json.dumps({"concepts": index.concepts, "words": index.words},
                       ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    postings = index.postings
    lengths = array("I", (len(postings[word]) for word in index.words))
    numbers = array(index.typecode)
    for word in index.words:
        numbers.extend(postings[word])
    return b"".join((_MAGIC, index.typecode.encode("ascii"),
                     _HEADER.pack(len(names), len(lengths), len(numbers)),
                     names, lengths.tobytes(), numbers.tobytes()))


def unpacked_index(data: bytes | None, concept_ids: Collection[str]) -> BodyWordIndex | None:
    """The index :func:`packed_index` packed, or ``None`` unless ``data`` reads back whole as
    one: exact lengths, distinct words, every posting non-empty and within the numbers, and
    exactly ``concept_ids`` (the snapshot's concepts) numbered, each once."""
    head = len(_MAGIC) + 1
    if data is None or len(data) < head + _HEADER.size or not data.startswith(_MAGIC):
        return None
    code = data[len(_MAGIC):head].decode("ascii", "replace")
    if code not in ("H", "I"):
        return None
    names_length, word_count, total = _HEADER.unpack_from(data, head)
    at = head + _HEADER.size
    lengths, numbers = array("I"), array(code)
    ends = (at + names_length, at + names_length + lengths.itemsize * word_count)
    if len(data) != ends[1] + numbers.itemsize * total:
        return None
    try:
        names = json.loads(data[at:ends[0]])
    except (UnicodeDecodeError, ValueError):
        return None
    if not isinstance(names, dict):
        return None
    concepts, words = names.get("concepts"), names.get("words")
    if not (isinstance(concepts, list) and isinstance(words, list) and len(words) == word_count
            and set(map(type, words)) <= {str} and all(words)  # in C: strings, none empty
            and set(map(type, concepts)) <= {str, type(None)}):
        return None
    numbered = {c: n for n, c in enumerate(concepts) if c is not None}
    if len(numbered) != len(concept_ids) or len(numbered) + concepts.count(None) != len(
            concepts) or not all(c in numbered for c in concept_ids):
        return None
    lengths.frombytes(data[ends[0]:ends[1]])
    numbers.frombytes(data[ends[1]:])
    if sum(lengths) != total or (total and min(lengths) == 0):
        return None
    postings = PackedPostings(tuple(words), array("I", accumulate(lengths, initial=0)),
                              numbers)
    # Postings are written sorted (the stream's checksum vouches for the bytes): each one's
    # last number is its largest, and each names a concept. Checked in C, a posting's last
    # number at each end.
    if total and max(map(numbers.__getitem__,
                         map((-1).__add__, islice(postings.ends, 1, None)))) >= len(concepts):
        return None
    if len(postings) != word_count or (code == "H" and len(concepts) > _SHORT_LIMIT):
        return None  # a word twice, or numbers past the postings' type
    return _index(postings, tuple(concepts), numbered, code)


class PackedPostings(Mapping[str, "array[int]"]):
    """The postings of an index read back, as they were kept: every word's numbers one after
    the other in one array, a word's a slice made when asked for. An array and a dictionary
    entry per word (49,784 at the bench size) took 50-60 ms to make on a restarted server's
    first search, and about 3 MB more."""

    __slots__ = ("_at", "ends", "_numbers")

    def __init__(self, words: tuple[str, ...], ends: array[int], numbers: array[int]) -> None:
        self._at = dict(zip(words, range(len(words)), strict=True))
        self.ends = ends  # word n's numbers are numbers[ends[n]:ends[n + 1]]
        self._numbers = numbers

    def __getitem__(self, word: str) -> array[int]:
        n = self._at[word]
        return self._numbers[self.ends[n]:self.ends[n + 1]]

    def __iter__(self) -> Iterator[str]:
        return iter(self._at)

    def __len__(self) -> int:
        return len(self._at)

    def __contains__(self, word: object) -> bool:
        return word in self._at


def _stored_index(snapshot: Snapshot) -> BodyWordIndex | None:
    """The index an earlier process kept for the snapshot's revision, when it reads back."""
    store = snapshot.inbound
    if store is None:
        return None
    return unpacked_index(store.stored_bytes(snapshot.revision, STORED_NAME), snapshot.concepts)


def _build_or_update(snapshot: Snapshot, token: CancelToken) -> BodyWordIndex:
    found = kept_earlier(snapshot, BODY_WORDS)
    if found is not None:
        before, earlier = found
        updated = updated_index(earlier, before, snapshot, token)
        if updated is not None:
            return updated
    stored = _stored_index(snapshot)
    if stored is not None:
        return stored
    index = build_index(snapshot, token)
    if snapshot.inbound is not None:
        snapshot.inbound.keep_bytes(snapshot.revision, STORED_NAME, packed_index(index))
    return index


def index_of(snapshot: Snapshot, token: CancelToken) -> BodyWordIndex:
    """The snapshot's index, built (or updated from its predecessor's) on first use."""
    return of_snapshot(snapshot, BODY_WORDS, lambda: _build_or_update(snapshot, token),
                       check=token.check)


def _warm(snapshot: Snapshot, token: CancelToken) -> None:
    index_of(snapshot, token)


BODY_WORDS: Slot[BodyWordIndex] = Slot(
    "body_words", "snapshot",
    "each word of the concepts' folded bodies → the concepts holding it, which narrows the "
    "bodies search_concepts checks",
    _warm,
    carried=True,  # updated from the predecessor's (_build_or_update)
)
SLOTS = (BODY_WORDS,)


def kept_index(snapshot: Snapshot) -> BodyWordIndex | None:
    """The snapshot's index when the warm-up has built it, or an earlier process kept it for
    this revision (read back now, and kept by the snapshot), else ``None``: a call then scans,
    and never waits for a build that costs about fifty scans. Until the index is there, each
    call looks in the parse cache again (one query when nothing is kept)."""
    index = kept(snapshot, BODY_WORDS)
    if index is not None:
        return index
    stored = _stored_index(snapshot)
    if stored is None:
        return None
    return of_snapshot(snapshot, BODY_WORDS, lambda: stored)
