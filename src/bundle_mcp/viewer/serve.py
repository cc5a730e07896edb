"""``bundle-mcp view --serve``: the same page, live, over HTTP on loopback only.

The bundle is held in a :class:`~bundle_mcp.snapshots.SnapshotCache` with its folder watch, so a
request costs no walk while nothing changed, and after an edit the next request captures the
change (re-reading only the files the watch names) and makes the page again. An unchanged
snapshot is the same object, so its page is served from memory.

Loopback only, and the ``Host`` header must name a loopback address: the page holds the whole
bundle, and a web page elsewhere must not be able to read it through a DNS name rebound to
127.0.0.1.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
import threading
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

from ..cancel import CancelToken
from ..errors import BundleError
from ..loader.parse_cache import ParseCache
from ..model import Snapshot
from ..snapshots import SnapshotCache
from .data import ViewOptions
from .page import build_page, content_security_policy

log = logging.getLogger("bundle_mcp.viewer")

LOOPBACK_NAMES = ("localhost",)


def is_loopback(host: str) -> bool:
    """``localhost``, or an IPv4/IPv6 address in the loopback range."""
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class LivePage:
    """The page of one bundle, made again only when the snapshot or the options changed."""

    def __init__(self, bundle_path: str, options: Callable[[], ViewOptions]) -> None:
        self._bundle_path = bundle_path
        self._options = options
        # No persistent parse cache: a viewer should leave nothing behind in ~/.cache.
        self._cache = SnapshotCache(max_bundles=1, parse_cache=ParseCache(None))
        self._lock = threading.Lock()
        self._made: tuple[Snapshot, ViewOptions, bytes] | None = None

    def page(self) -> bytes:
        """The current page (raises ``BundleError`` when the bundle cannot be loaded)."""
        with self._lock:  # one build at a time: a second request waits and reuses it
            snapshot = self._cache.get(self._bundle_path, CancelToken())
            options = self._options()
            made = self._made
            if made is not None and made[0] is snapshot and made[1] == options:
                return made[2]
            body = build_page(snapshot, options).encode("utf-8")
            self._made = (snapshot, options, body)
            return body


class ViewServer(ThreadingHTTPServer):
    """A threading HTTP server for one :class:`LivePage` (IPv6 when the host is)."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, host: str, port: int, live: LivePage) -> None:
        self.address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.live = live
        super().__init__((host, port), _Handler)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        name = host.decode() if isinstance(host, bytes) else str(host)
        shown = f"[{name}]" if ":" in name else name
        return f"http://{shown}:{port}/"

    def host_allowed(self, header: str | None) -> bool:
        """Whether a ``Host`` header names this server by a loopback address or name."""
        if not header:
            return False
        value = header.strip()
        given: str | None
        if value.startswith("["):  # [::1]:8000 or [::1]
            name, _, rest = value[1:].partition("]")
            given = rest[1:] if rest.startswith(":") else (None if rest else "")
        elif value.count(":") == 1:
            name, _, given = value.partition(":")
        else:
            name, given = value, ""
        if given is None or (given and given != str(self.server_address[1])):
            return False
        return is_loopback(name)


class _Handler(BaseHTTPRequestHandler):
    server: ViewServer
    server_version = "bundle-mcp-view"
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:  # noqa: N802 - the name http.server dispatches to
        self._respond(send_body=True)

    def do_HEAD(self) -> None:  # noqa: N802
        self._respond(send_body=False)

    def _respond(self, send_body: bool) -> None:
        if not self.server.host_allowed(self.headers.get("Host")):
            self._plain(HTTPStatus.MISDIRECTED_REQUEST,
                        "this server answers only to a loopback Host (127.0.0.1, ::1, localhost)",
                        send_body)
            return
        if urlsplit(self.path).path not in ("/", "/index.html"):
            self._plain(HTTPStatus.NOT_FOUND, "not found: the viewer serves one page, /",
                        send_body)
            return
        try:
            body = self.server.live.page()
        except BundleError as exc:
            self._plain(HTTPStatus.INTERNAL_SERVER_ERROR,
                        f"the bundle cannot be loaded: {exc.message}", send_body)
            return
        except Exception:  # a bug: say so in the log, not in the page
            log.exception("making the viewer page failed")
            self._plain(HTTPStatus.INTERNAL_SERVER_ERROR, "making the page failed; see the log",
                        send_body)
            return
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self._common_headers()
        self.end_headers()
        if send_body:
            self.wfile.write(body)

    def _common_headers(self) -> None:
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("X-Frame-Options", "DENY")

    def _plain(self, status: HTTPStatus, text: str, send_body: bool) -> None:
        body = (text + "\n").encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        # A plain-text answer runs nothing either.
        self.send_header("Content-Security-Policy", content_security_policy([], []))
        self._common_headers()
        self.end_headers()
        if send_body:
            self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base's name
        log.info("%s %s", self.address_string(), format % args)
