"""A kept answer outlives its process: stored in the parse cache, read back after a restart.

A tool that keeps its answers (``ToolSpec.cache_results``: list_concepts, get_semantic_graph,
bundle_summary, validate_bundle) answers from what the snapshot and the arguments decide, and
nothing else: no clock, no state of the process. A restarted server on the same files would
make the same bytes again, at the cost of building every document and structure the answer
reads (2 to 5 s at 10,000 concepts before the warm-up is done). So the answer's encoding is
stored beside the query parts (:class:`~bundle_mcp.toolspec.PartStore`, keyed by the
snapshot's revision) and the next process writes those bytes without building anything.

What else decides an answer goes into the key (:func:`answer_key`): the release, the tool, the
canonical arguments, the server's settings that shape answers, and what the revision does not
cover (assets, folders, skipped entries, attachments). Only the whole bundle's answers are
stored: a reader's view, or a remote bundle's copy, is never written or read here.

An answer over its budget is stored as that refusal (:func:`packed_refusal`): the snapshot and
the arguments decide it as they decide an answer, and finding it out means making the whole
answer (get_semantic_graph at 50,000 concepts: 18 s of building every node, at every restart).

Like every row of the parse cache the stored bytes are a cache: they are checked whole on the
way back (length and SHA-256 of the decompressed encoding), and anything that does not check out
is made again from the files. The text block's JSON string is the encoding escaped, and its
length (which a written line announces before a byte of it is made) is stored beside the
encoding's, under the digest: counting the quotes and backslashes of get_semantic_graph's 14 MB
again took 13 ms of a restarted server's first call.
"""

from __future__ import annotations

import hashlib
import json
import struct

import zstandard

from ._version import __version__
from .errors import BundleError, Diagnostic
from .model import Snapshot, outside_revision
from .pieces import PackedBytes

__all__ = ["FORMAT", "answer_key", "packed", "packed_refusal", "unpacked", "unpacked_refusal"]

# 3: the text block's length stored too (2: counted on the way back; 1: zlib's deflate).
FORMAT = "kept-answer/3"
_MAGIC = b"bka3"
_REFUSAL_MAGIC = b"bkr1"  # then the refusal's JSON: code, message, diagnostics' rows
# The encoding's length and its JSON string's (quotes included), the first bytes digested.
_LENGTHS = struct.Struct("<QQ")
# magic, the two lengths, the SHA-256 of the lengths and the encoding; the compressed frame
# follows
_HEADER = struct.Struct("<4sQQ32s")


def answer_key(snapshot: Snapshot, tool: str, arguments_json: str, settings: str) -> str:
    """The stored answer's key under the snapshot's revision: the tool, then a digest of
    everything else the answer depends on (module docstring). ``arguments_json``: the
    canonical JSON of the arguments; ``settings``: the server's settings that shape answers."""
    decided_by = json.dumps([
        FORMAT, __version__, tool, arguments_json, settings, *outside_revision(snapshot),
    ], ensure_ascii=True, separators=(",", ":"))
    return f"{FORMAT}/{tool}/{hashlib.sha256(decided_by.encode('ascii')).hexdigest()}"


def packed(encoding: PackedBytes, quoted_size: int) -> bytes:
    """The stored form of a kept answer's structured encoding, whose JSON string (the text
    block, ``JsonStringPieces``) is ``quoted_size`` bytes long."""
    digest = hashlib.sha256(_LENGTHS.pack(encoding.size, quoted_size))
    for piece in encoding:
        digest.update(piece)
    return _HEADER.pack(_MAGIC, encoding.size, quoted_size, digest.digest()) + encoding.compressed


def unpacked(data: bytes) -> tuple[PackedBytes, int] | None:
    """The encoding :func:`packed` stored and its JSON string's length (quotes included, as
    ``JsonStringPieces`` counts it), after decompressing it once to check its length and the
    digest of both lengths and the encoding; ``None`` for anything else (the answer is then
    made again)."""
    if len(data) < _HEADER.size:
        return None
    magic, size, quoted_size, expected = _HEADER.unpack_from(data)
    if magic != _MAGIC or quoted_size < size + 2:
        return None
    encoding = PackedBytes.of_compressed(data[_HEADER.size:], size)
    digest = hashlib.sha256(_LENGTHS.pack(size, quoted_size))
    total = 0
    try:
        for piece in encoding:
            digest.update(piece)
            total += len(piece)
    except zstandard.ZstdError:
        return None
    if total != size or digest.digest() != expected:
        return None
    return encoding, quoted_size


def packed_refusal(refused: BundleError) -> bytes:
    """The stored form of a kept answer's refusal (an answer over its budget)."""
    return _REFUSAL_MAGIC + json.dumps(
        [refused.code, refused.message, [d.as_row() for d in refused.diagnostics]],
        ensure_ascii=True, separators=(",", ":")).encode("ascii")


def unpacked_refusal(data: bytes) -> BundleError | None:
    """The refusal :func:`packed_refusal` stored; ``None`` for anything else."""
    if not data.startswith(_REFUSAL_MAGIC):
        return None
    try:
        code, message, rows = json.loads(data[len(_REFUSAL_MAGIC):])
        if not (type(code) is str and type(message) is str and type(rows) is list):
            return None
        return BundleError(code, message, tuple(Diagnostic.from_row(row) for row in rows))
    except (ValueError, TypeError):
        return None
