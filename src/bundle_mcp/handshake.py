"""The answer to ``initialize`` over stdio, written before the MCP SDK is imported.

A host spawns ``bundle-mcp serve`` and sends ``initialize`` at once; many give up on a server
that takes seconds to answer it, and each waits for the answer before anything else. Importing
the SDK, its pydantic models and the dispatcher's modules takes about a second, so ``serve``
over stdio first reads the client's opening line here, with nothing but the standard library
imported, and when it is an ``initialize`` request this module can answer exactly as the SDK
would, it writes that answer at once (:func:`open_stdio`). Only then are the SDK and the
dispatcher imported, the bundles loaded and warmed.

The opening line is then handed to the SDK like any other (:mod:`bundle_mcp.stdio` replays it),
so the SDK's session negotiates and records the client exactly as before; the transport drops
the SDK's own reply to it, which it compares with the one already sent (a difference is logged
as an error). ``tests/test_first_answer.py`` compares the two for many requests, and pins that
the heavy modules are not imported when the answer is written.

The early answer is written only for requests whose shape the SDK surely accepts (see
:func:`early_answer`); anything else (another method, an unusual id, ``_meta``, capabilities of
types this module does not check) waits for the SDK, which answers it as it always did.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import stat
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, BinaryIO

from ._version import __version__
from .wire_lines import LineSource

__all__ = [
    "HANDSHAKE_VERSIONS",
    "PIPE_BYTES",
    "INSTRUCTIONS",
    "SERVER_NAME",
    "STDIO_CAPABILITIES",
    "EarlyAnswer",
    "Opening",
    "claimed_stdio",
    "early_answer",
    "open_stdio",
    "plain_id",
    "widen_pipe",
]

log = logging.getLogger(__name__)

SERVER_NAME = "bundle-mcp"

INSTRUCTIONS = """\
This server answers questions from an Open Knowledge Format bundle: Markdown concepts with YAML \
frontmatter, links and typed relations.
Work in a loop: 0. on a bundle you do not know, bundle_summary first (types, tags, folders, \
most-linked concepts); 1. a question in plain words: context; a known term: search_concepts with \
one distinctive literal (an ID, title, tag or phrase); passages: search_sections; 2. read only the \
IDs you picked with read_concept; 3. widen at most twice (get_neighbors, expand_neighbors, \
fetch_slice, query_subgraph, visualize_graph; find_path links two concepts), then answer. Never \
walk the whole graph.
Terms:
- concept_id: the bundle path without .md (tables/orders.md -> tables/orders); case-sensitive, \
spaces and # allowed; no '.' or '..' segments, '\\', ':', control characters, or a last \
segment index or log.
- locator: path#Lstart-Lend, one section as search_sections returns it. Cite a locator with \
snapshot_revision, or cite the concept (parent_id): locators change when a file is edited.
- bundle_path: the absolute path of the bundle root; omit it when the server serves one bundle.
- temporal_profile: date-3fcbb9f (default; stale_after, last_modified, usage_window and as_of \
are YYYY-MM-DD) or instant-0b87c52 (RFC 3339 date-times with Z or +HH:MM/-HH:MM). as_of is \
the time 'stale' is judged at; without it stale is null (the clock is never read).
Bounds: the search, read and write tools reject numbers out of range (limit 101 is \
resource_limit); the walk and semantic tools, and bundle_summary's top, clamp their budgets and \
echo what they applied. \
total and truncated say what a limit left out; there is no cursor: narrow the request or raise \
limit. Never claim that an omitted hit or edge was inspected; report the limit instead.
Errors: a failed call has isError and {code, message, retryable, diagnostics}; an invalid_input \
diagnostic names the argument (field) and the rule it breaks, and resource_limit adds a \
recovery_step; concept_not_found adds up to five did_you_mean suggestions (never used in its \
place). Fix the argument and retry; only operation_cancelled is retryable as is.
Writes, when served: preview_* writes nothing and returns base_revision and plan_digest; \
apply_* with the same arguments plus those publishes atomically, or fails with \
revision_conflict or plan_mismatch: preview again. An identical apply or write_concept replays \
its result instead of writing twice.
"""

# The protocol versions the SDK negotiates through ``initialize`` (mcp_types.version's
# HANDSHAKE_PROTOCOL_VERSIONS, which tests/test_first_answer.py compares with this): a version
# the client asks for is granted when listed, else the server offers the newest one.
HANDSHAKE_VERSIONS: tuple[str, ...] = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")

# What the stdio server can do, as the SDK states it for the handlers server.build_server
# registers with streams on (resources change and can be subscribed to; logging/setLevel).
STDIO_CAPABILITIES: Mapping[str, Any] = {
    "completions": {},
    "logging": {},
    "prompts": {"listChanged": False},
    "resources": {"listChanged": True, "subscribe": True},
    "tools": {"listChanged": False},
}

# Ids echoed without a doubt about their JSON text: integers of exact double range, and short
# strings of printable ASCII with nothing to escape.
_MAX_ID = 2**53
_PLAIN_ID = frozenset(chr(c) for c in range(0x20, 0x7F)) - {'"', "\\"}
_TOP_KEYS = frozenset({"jsonrpc", "id", "method", "params"})
_PARAM_KEYS = frozenset({"protocolVersion", "capabilities", "clientInfo"})


@dataclass(frozen=True)
class EarlyAnswer:
    """The reply written to an opening ``initialize`` request, and the request's id."""

    request_id: int | str
    reply: bytes  # the whole line, newline included


@dataclass(frozen=True)
class Opening:
    """The client's first line, read before the SDK was imported, and the answer written;
    with :mod:`bundle_mcp.first_call`, also the lines read after it that the SDK's session
    must still see, and the notices already told."""

    line: bytes  # b"" when the input ended before a line came
    answered: EarlyAnswer | None = None
    then: tuple[bytes, ...] = ()  # replayed after ``line`` (the initialized notification)
    told: frozenset[tuple[str, ...]] = frozenset()  # keys of the notices sent

    @property
    def replayed(self) -> tuple[bytes, ...]:
        """The lines to hand the SDK's session before any other, in order."""
        return (self.line, *self.then)


def early_answer(line: bytes) -> EarlyAnswer | None:
    """The SDK's answer to ``line`` if it is an ``initialize`` request this module can answer
    byte for byte as the SDK does, else ``None`` (the SDK will answer it)."""
    try:
        message = json.loads(line.decode("utf-8"), parse_constant=_refuse)
    except (ValueError, RecursionError):  # UnicodeDecodeError and JSONDecodeError included
        return None
    if not isinstance(message, dict) or set(message) != _TOP_KEYS:
        return None
    request_id = message["id"]
    if (message["jsonrpc"] != "2.0" or message["method"] != "initialize"
            or not plain_id(request_id) or not _plain_params(message["params"])):
        return None
    requested = message["params"]["protocolVersion"]
    version = requested if requested in HANDSHAKE_VERSIONS else HANDSHAKE_VERSIONS[-1]
    result = {
        "capabilities": STDIO_CAPABILITIES,
        "instructions": INSTRUCTIONS,
        "protocolVersion": version,
        "serverInfo": {"name": SERVER_NAME, "version": __version__},
    }
    reply = {"jsonrpc": "2.0", "id": request_id, "result": result}
    text = json.dumps(reply, ensure_ascii=False, separators=(",", ":"))
    return EarlyAnswer(request_id, text.encode("utf-8") + b"\n")


def _refuse(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def plain_id(value: object) -> bool:
    """An id echoed without a doubt about its JSON text (see :data:`_PLAIN_ID`)."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return -_MAX_ID < value < _MAX_ID
    return isinstance(value, str) and 0 < len(value) <= 128 and set(value) <= _PLAIN_ID


def _plain_params(params: object) -> bool:
    """Params the SDK's InitializeRequestParams surely accepts, with nothing in them that could
    change its answer. Keys it does not know it ignores; values of the keys it knows must have
    their exact types here (no lax coercion is relied on)."""
    if not isinstance(params, dict) or not _PARAM_KEYS <= set(params) or "_meta" in params:
        return False
    if not isinstance(params["protocolVersion"], str):
        return False
    return _plain_client_info(params["clientInfo"]) and _plain_capabilities(
        params["capabilities"])


def _plain_client_info(info: object) -> bool:
    if not isinstance(info, dict) or "icons" in info:
        return False
    if not (isinstance(info.get("name"), str) and isinstance(info.get("version"), str)):
        return False
    return all(info.get(key) is None or isinstance(info[key], str)
               for key in ("title", "description", "websiteUrl"))


def _plain_capabilities(capabilities: object) -> bool:
    if not isinstance(capabilities, dict) or "tasks" in capabilities:
        return False
    for key in ("experimental", "extensions", "sampling", "elicitation"):
        # Maps of objects: for sampling and elicitation the inner objects are capabilities
        # without fields of their own, whose keys the SDK ignores.
        value = capabilities.get(key)
        if value is not None and not (
            isinstance(value, dict) and all(isinstance(v, dict) for v in value.values())
        ):
            return False
    roots = capabilities.get("roots")
    if roots is None:
        return True
    return isinstance(roots, dict) and (roots.get("listChanged") is None
                                        or isinstance(roots["listChanged"], bool))


def open_stdio(wire_in: LineSource, wire_out: BinaryIO) -> Opening:
    """Read the client's first line and, when :func:`early_answer` can, answer it now."""
    line = wire_in.readline()
    answer = early_answer(line) if line else None
    if answer is not None:
        wire_out.write(answer.reply)
        wire_out.flush()
        log.debug("initialize answered before the SDK and the bundles were loaded")
    return Opening(line, answer)


@contextmanager
def claimed_stdio() -> Iterator[tuple[BinaryIO, BinaryIO]]:
    """Private duplicates of fd 0 and 1 for the wire; fd 0 → /dev/null and fd 1 → stderr.

    While serving, a tool or a child process that reads stdin or prints cannot touch the wire;
    both descriptors are restored on exit.
    """
    sys.stdout.flush()
    # F_DUPFD_CLOEXEC from 3: the copies never land on a standard descriptor (when one is
    # closed at start) and are not inherited by child processes.
    wire_in = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    wire_out = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
    widen_pipe(wire_out)
    _divert(0, os.O_RDONLY)
    _divert(1, os.O_WRONLY, onto=2)
    try:
        # closefd=False and no close later: an abandoned reader thread may still block in
        # read(wire_in), and a closed, reused descriptor number would feed it another file.
        yield os.fdopen(wire_in, "rb", closefd=False), os.fdopen(wire_out, "wb", closefd=False)
    finally:
        sys.stdout.flush()
        os.dup2(wire_in, 0)
        os.dup2(wire_out, 1)


# The pipe buffer asked for on the wire out: Linux's default ceiling for a process without
# privileges (/proc/sys/fs/pipe-max-size), 16 times its default of 64 KiB.
PIPE_BYTES = 1 << 20


def widen_pipe(fd: int) -> int | None:
    """Ask for a :data:`PIPE_BYTES` buffer when ``fd`` is a pipe (Linux), and return the size
    it has then; ``None`` where there is no such setting or the kernel refuses (another system,
    a file or a socket, a limit below it, too many pipe pages for the user already).

    A big answer is written faster: get_semantic_graph's line at 10,000 concepts is about 30
    MB (its structured content and the text block's JSON string), and the writer blocks each
    time the pipe is full until the client has read it, 460 times with 64 KiB and 29 with 1
    MiB (the bench client's median 140-144 → 99-108 ms, three runs each, alternated).
    """
    set_size = getattr(fcntl, "F_SETPIPE_SZ", None)
    if set_size is None:
        return None
    try:
        if not stat.S_ISFIFO(os.fstat(fd).st_mode):
            return None
        return int(fcntl.fcntl(fd, set_size, PIPE_BYTES))
    except OSError:
        return None


def _divert(fd: int, flags: int, onto: int | None = None) -> None:
    """Point ``fd`` at descriptor ``onto``, or at the null device opened with ``flags``."""
    if onto is not None:
        try:
            os.dup2(onto, fd)
            return
        except OSError:  # no stderr (a daemon started with fd 2 closed)
            pass
    null = os.open(os.devnull, flags)
    try:
        os.dup2(null, fd)
    finally:
        os.close(null)
