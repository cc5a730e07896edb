"""Big tool answers on the stdio wire: encoded once, off the event loop, by the SDK's encoder.

For a ``tools/call`` result the SDK (``mcp`` 2.3) walks the whole structured content three times
before a byte is written, all of it on the event loop: ``CallToolResult.model_dump``, the
per-version result sieve (validated, then dumped again) and the ``JSONRPCResponse``'s
``model_dump_json``; the text block, the same JSON again as a string, is copied with it. On a
10,000-concept bundle ``get_semantic_graph`` answers 14 MB of structured content: its answer is
kept and ready in 0.1 ms, and the SDK then spent about 0.8 s on it (``make bench``).

So on stdio a big answer goes through the SDK as two small placeholders, the structured content
``{"<token>-s": 0}`` and the text ``"<token>-t"``, and the writer swaps them, in the line the SDK
encoded, for the encodings of the real values. Those are made by ``pydantic_core.to_json``, the
encoder of the SDK's own last step, in the tool's worker thread, so the line is the one the SDK
would have written, byte for byte (``tests/test_answer_lines.py`` compares both paths on every
kind of value). A kept answer (``ToolSpec.cache_results``) was encoded when it was kept
(:attr:`Outcome.wire`, by the warm-up for the default calls): a repeated big answer is only
copied out.

A token is random per connection: no client-chosen text can be mistaken for one. A value the
encoder refuses (a lone surrogate) is not held: the SDK's own path answers it, as before, with
``-32603``. A held answer whose request was cancelled is never written; at most
:data:`MAX_PENDING` are kept, the oldest dropped first, and a line whose placeholder was dropped
becomes ``-32603`` (``stdio``) rather than a placeholder on the wire.
"""

from __future__ import annotations

import itertools
import logging
import secrets
import threading
from collections import OrderedDict
from collections.abc import Iterable

import mcp.types as types

from .dispatch import Outcome, WireJson

__all__ = ["MAX_PENDING", "MIN_HELD_CHARS", "AnswerLines", "plain_result"]

log = logging.getLogger(__name__)

# Below this many characters of text block the SDK's walks cost less than a millisecond, and a
# small answer takes the SDK's own path.
MIN_HELD_CHARS = 32 * 1024
MAX_PENDING = 32  # held answers not yet written (a cancelled request's is never written)


def plain_result(outcome: Outcome) -> types.CallToolResult:
    """``outcome`` as the SDK's result model: the text block and the structured content."""
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=outcome.text)],
        structured_content=outcome.structured,
        is_error=outcome.is_error,
    )


class AnswerLines:
    """The placeholders of one stdio connection's big answers, and their encodings.

    :meth:`hold` runs in a tool's worker thread; :meth:`expand` in the writer. Both take the
    lock only to move entries.
    """

    def __init__(self, min_chars: int = MIN_HELD_CHARS) -> None:
        self._min_chars = min_chars
        self._prefix = f"bundle-mcp-answer-{secrets.token_hex(16)}-"
        self._count = 0
        self._lock = threading.Lock()
        self._pending: OrderedDict[str, WireJson] = OrderedDict()

    def holds(self, outcome: Outcome) -> bool:
        """Whether :meth:`hold` would hold ``outcome`` (a cheap test: ``hold`` encodes; a kept
        answer's text is measured in the bytes it is kept as, never decoded for this)."""
        return outcome.text_size >= self._min_chars

    def hold(self, outcome: Outcome) -> types.CallToolResult:
        """The result to hand the SDK: ``outcome`` itself when it is small, else placeholders
        whose values :meth:`expand` puts back. Encodes (unless the outcome is a kept answer,
        encoded when it was kept): call it off the event loop."""
        if not self.holds(outcome):
            return plain_result(outcome)
        encoded = outcome.encoded()
        if encoded is None:
            return plain_result(outcome)
        with self._lock:
            self._count += 1
            token = f"{self._prefix}{self._count}"
            self._pending[token] = encoded
            while len(self._pending) > MAX_PENDING:
                dropped, _ = self._pending.popitem(last=False)
                log.warning("dropped the held answer %s: its request never reached the wire",
                            dropped)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=f"{token}-t")],
            structured_content={f"{token}-s": 0},
            is_error=outcome.is_error,
        )

    def is_held(self, message: types.JSONRPCMessage) -> bool:
        """Whether ``message`` is the reply of a held answer (its placeholders in it)."""
        return self._token_of(message) is not None

    def expand(self, message: types.JSONRPCMessage, line: bytes) -> Iterable[bytes] | None:
        """``line`` (``message`` as the SDK encoded it) with a held answer's values put back,
        as the pieces to write in turn, None when they are gone (the writer sends ``-32603``);
        any other line unchanged, as one piece. The pieces are never joined: a join copied the
        whole answer again for as long as it was written (28.6 MiB for ``get_semantic_graph``
        at 10,000 concepts, the highest point of a server's memory). They are made as they are
        taken (a kept answer's encoding is inflated, and its text's JSON string escaped, a piece
        at a time): take them once."""
        token = self._token_of(message)
        if token is None:
            return (line,)
        with self._lock:
            encoded = self._pending.pop(token, None)
        structured_at = line.find(b'{"' + f"{token}-s".encode() + b'":0}')
        text_at = line.find(b'"' + f"{token}-t".encode() + b'"')
        if encoded is None or structured_at < 0 or text_at < 0:
            log.error("the held answer %s could not be put back", token)
            return None
        structured_end = structured_at + len(token) + len('{"-s":0}')
        text_end = text_at + len(token) + len('"-t"')
        pieces = sorted([(structured_at, structured_end, encoded.structured),
                         (text_at, text_end, encoded.text)], key=lambda piece: piece[0])
        out: list[Iterable[bytes]] = []
        position = 0
        for start, end, value in pieces:
            out += ((line[position:start],), value)
            position = end
        out.append((line[position:],))
        return itertools.chain.from_iterable(out)

    def _token_of(self, message: types.JSONRPCMessage) -> str | None:
        if not isinstance(message, types.JSONRPCResponse):
            return None
        structured = message.result.get("structuredContent")
        if not isinstance(structured, dict) or len(structured) != 1:
            return None
        (key,) = structured
        if not (isinstance(key, str) and key.startswith(self._prefix) and key.endswith("-s")):
            return None
        return key[:-2]

