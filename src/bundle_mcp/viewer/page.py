"""The viewer page: one HTML file holding its styles, its scripts and the bundle's data.

Nothing in it loads from anywhere: the vendored libraries (``vendor/``, see ``MANIFEST.json``)
and the page's own script and style are inlined, the data is a JSON block, and a
Content-Security-Policy allows no fetch of any kind (``default-src 'none'``, images from
``data:`` only). Scripts run only when their SHA-256 is listed in that policy, so even markup
that slipped through both sanitisers could not run an inline handler (``onerror=``) or a
``javascript:`` URL: those would need ``'unsafe-inline'``, which the policy never grants.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import re
from dataclasses import dataclass
from importlib import resources
from typing import Any

from ..cancel import CancelToken
from ..errors import BundleMcpError
from ..model import Snapshot
from .data import ViewOptions, page_data

_PLACEHOLDER = re.compile(r"\{\{([A-Z_]+)\}\}")
# In a <script> element the HTML parser looks only for these: "</script" ends the element
# early, and "<!--" followed later by "<script" makes it swallow what comes after. Inlined
# code must hold neither; JSON data is escaped so it cannot (see json_for_script).
_SCRIPT_END = re.compile(r"</script", re.IGNORECASE)
_SCRIPT_START = re.compile(r"<script", re.IGNORECASE)
_SCRIPT_SENSITIVE = re.compile(r"<(/|!--|script)", re.IGNORECASE)


class VendorMismatch(BundleMcpError):
    """A vendored file differs from vendor/MANIFEST.json (re-run ``make vendor-js``)."""


@dataclass(frozen=True, slots=True)
class Vendored:
    """One vendored library: what the page inlines and the licence it is shipped under."""

    name: str
    version: str
    licence: str
    homepage: str
    purpose: str
    script: str
    licence_texts: tuple[tuple[str, str], ...]  # (file name, text)


def _asset(name: str) -> str:
    return (resources.files(__package__) / "assets" / name).read_text(encoding="utf-8")


def vendored() -> tuple[Vendored, ...]:
    """The vendored libraries, each file checked against the manifest's sha256."""
    vendor = resources.files(__package__) / "vendor"
    manifest = json.loads((vendor / "MANIFEST.json").read_text(encoding="utf-8"))
    out = []
    for package in manifest["packages"]:
        script = ""
        licences = []
        for entry in package["files"]:
            data = (vendor / entry["file"]).read_bytes()
            if hashlib.sha256(data).hexdigest() != entry["sha256"]:
                raise VendorMismatch(f"vendor/{entry['file']} does not match MANIFEST.json")
            if entry["role"] == "script":
                script = data.decode("utf-8")
            else:
                licences.append((entry["file"], data.decode("utf-8")))
        out.append(Vendored(package["name"], package["version"], package["licence"],
                            package.get("homepage") or "", package.get("purpose") or "",
                            script, tuple(licences)))
    return tuple(out)


def json_for_script(value: Any) -> str:
    """JSON that is inert inside ``<script type="application/json">`` and parses back to the
    same value.

    Only what the HTML parser reacts to in a script element is escaped: ``</`` becomes ``<\\/``
    (so no ``</script`` can end it), ``<!--`` and ``<script`` start with ``\\u003c`` (so it never
    enters the escaped states that would swallow the rest of the page). ``<`` occurs only inside
    JSON strings, where both escapes are valid. Escaping every ``<`` (and ``>``) would be as
    safe, but the rendered Markdown is mostly tags: the 1,000-concept benchmark page grew by a
    tenth that way.
    """
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return _SCRIPT_SENSITIVE.sub(_escape_sensitive, text)


def _escape_sensitive(match: re.Match[str]) -> str:
    rest = match.group(1)
    return "<\\/" if rest == "/" else "\\u003c" + rest


def check_inline_script(name: str, text: str) -> None:
    """Refuse code that would not stay inside its ``<script>`` element."""
    if _SCRIPT_END.search(text) or ("<!--" in text and _SCRIPT_START.search(text)):
        raise ValueError(f"{name} cannot be inlined: it holds '</script' or '<!--' with "
                         "'<script'")


def _hash(text: str) -> str:
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return "'sha256-" + base64.b64encode(digest).decode("ascii") + "'"


def content_security_policy(scripts: list[str], styles: list[str]) -> str:
    """No fetch of any kind; only the page's own scripts and styles (by hash) apply."""
    return "; ".join([
        "default-src 'none'",
        "script-src " + (" ".join(_hash(s) for s in scripts) or "'none'"),
        "style-src " + (" ".join(_hash(s) for s in styles) or "'none'"),
        "img-src data:",
        "base-uri 'none'",
        "form-action 'none'",
    ])


def render_page(data: dict[str, Any]) -> str:
    """The page for ``page_data`` output: template, style, data, libraries, app script."""
    libraries = vendored()
    data = dict(data)
    data["licences"] = [
        {"name": lib.name, "version": lib.version, "licence": lib.licence,
         "homepage": lib.homepage, "purpose": lib.purpose,
         "texts": [{"file": f, "text": t} for f, t in lib.licence_texts]}
        for lib in libraries
    ]
    app = _asset("viewer.js")
    style = _asset("viewer.css")
    scripts = [*(lib.script for lib in libraries), app]
    for name, text in [*((lib.name, lib.script) for lib in libraries), ("viewer.js", app)]:
        check_inline_script(name, text)
    csp = content_security_policy(scripts, [style])
    meta = data["meta"]
    title = f"{meta['bundle'] or 'OKF bundle'} · bundle viewer"
    values = {
        "CSP": html.escape(csp, quote=True),
        "TITLE": html.escape(title),
        "STYLE": style,
        "DATA": json_for_script(data),
        "SCRIPTS": "\n".join(f"<script>{text}</script>" for text in scripts),
    }
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], _asset("page.html"))


def build_page(snapshot: Snapshot, options: ViewOptions,
               token: CancelToken | None = None) -> str:
    """The whole page for one snapshot."""
    return render_page(page_data(snapshot, options, token))
