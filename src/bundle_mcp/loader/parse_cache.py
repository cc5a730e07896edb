"""A persistent parse cache, so a restarted server does not parse every file again.

One JSON pack per bundle path lives outside the bundle, in the user's cache directory
(``$BUNDLE_MCP_CACHE_DIR``, else ``$XDG_CACHE_HOME/bundle-mcp``, else ``~/.cache/bundle-mcp``;
``BUNDLE_MCP_CACHE_DIR=off`` disables it). An entry is used only when its path and the SHA-256 of
the file's current bytes match and it decodes into exactly the expected shapes; a corrupt,
foreign or outdated entry is ignored and the file is parsed. JSON, never pickle: a cache file is
data, and loading it must not be able to run code.
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import Diagnostic
from ..model import (
    Document,
    FileRecord,
    FootnoteDef,
    FootnoteRef,
    FormatRules,
    Link,
    MarkdownFacts,
    Relation,
    Section,
    Unfrozen,
    thaw,
)
from .document import OKF_RULES
from .frontmatter import DELIMITER_LINE, split_frontmatter
from .text import BOM, count_breaks, count_lines

log = logging.getLogger(__name__)

FORMAT = "bundle-mcp-parse-cache/3"  # 3: concept files with unaddressable names are broken
MAX_PACKS = 32
_DISABLED = ("off", "none", "0", "false")


def default_directory() -> Path | None:
    configured = os.environ.get("BUNDLE_MCP_CACHE_DIR")
    if configured is not None:
        return None if configured.strip().lower() in _DISABLED else Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "bundle-mcp"


class ParseCache:
    """Reads and writes the pack of one bundle; every failure degrades to "not cached"."""

    def __init__(self, directory: Path | None) -> None:
        self._directory = directory / "parse" if directory is not None else None
        self._warned = False  # a cache that cannot be written is logged once
        self._warned_lock = threading.Lock()

    @classmethod
    def default(cls) -> ParseCache:
        return cls(default_directory())

    @property
    def enabled(self) -> bool:
        return self._directory is not None

    def _pack(self, bundle_path: str) -> Path | None:
        if self._directory is None:
            return None
        key = hashlib.sha256(bundle_path.encode("utf-8", "surrogateescape")).hexdigest()
        return self._directory / f"{key}.json"

    def load(self, bundle_path: str) -> Mapping[str, Any]:
        """The pack's entries by file path (empty when absent, unreadable or foreign)."""
        pack = self._pack(bundle_path)
        if pack is None:
            return {}
        try:
            with open(pack, encoding="utf-8") as handle:
                data = json.load(handle)
        except (OSError, ValueError):
            return {}
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            return {}
        if data.get("bundle") != bundle_path or not isinstance(data.get("entries"), dict):
            return {}
        entries: Mapping[str, Any] = data["entries"]  # checked above: a JSON object
        return entries

    def save(self, bundle_path: str, documents: Mapping[str, Document]) -> None:
        """Write the pack atomically; a cache that cannot be written is skipped.

        The first failure is logged (one warning per cache, however many saves follow): the
        server works on, only a restart parses the bundle again.
        """
        pack = self._pack(bundle_path)
        if pack is None:
            return
        entries = {path: encode(doc) for path, doc in documents.items()}
        payload = {"format": FORMAT, "bundle": bundle_path, "entries": entries}
        try:
            pack.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=pack.parent, prefix=".pack-", suffix=".tmp")
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as handle:
                    json.dump(payload, handle, ensure_ascii=False, separators=(",", ":"))
                os.replace(tmp, pack)
            except BaseException:
                if os.path.exists(tmp):
                    os.unlink(tmp)
                raise
            _prune(pack.parent)
        except OSError as exc:
            with self._warned_lock:
                first, self._warned = not self._warned, True
            if first:
                log.warning(
                    "the parse cache in %s cannot be written (%s); serving without it, so a "
                    "restart parses the bundle again (set BUNDLE_MCP_CACHE_DIR to a writable "
                    "folder, or to off)",
                    self._directory,
                    errno.errorcode.get(exc.errno or 0, "error"),
                )


def _prune(directory: Path) -> None:
    """Keep the :data:`MAX_PACKS` newest packs. Other processes share the folder (``--workers``,
    two servers of one user) and prune it too: a pack gone between the listing and its ``stat``
    is one less to remove, never a failed save."""
    dated: list[tuple[float, Path]] = []
    for pack in directory.glob("*.json"):
        try:
            dated.append((pack.stat().st_mtime, pack))
        except FileNotFoundError:
            continue
    dated.sort(reverse=True)
    for _mtime, stale in dated[MAX_PACKS:]:
        stale.unlink(missing_ok=True)


def has_markdown(doc: Document) -> bool:
    """Whether the document's Markdown facts have been computed (and so can be cached)."""
    return "markdown" in doc.__dict__ or markdown_from_cache(doc)


def markdown_from_cache(doc: Document) -> bool:
    """Whether the document's Markdown facts are read back from this cache (on first use)."""
    return isinstance(doc.rules.markdown, _CachedMarkdown)


def encode(doc: Document) -> dict[str, Any]:
    facts = doc.__dict__.get("markdown")
    if facts is None and markdown_from_cache(doc):
        facts = doc.markdown
    return {
        "sha256": doc.record.sha256,
        "size": doc.record.size,
        "kind": doc.kind,
        "concept_id": doc.concept_id,
        "frontmatter": None if doc.frontmatter is None else thaw(doc.frontmatter),
        "layout": _layout_of(doc),
        "parse_error": None if doc.parse_error is None else _diag(doc.parse_error),
        "relations": [
            [r.source, r.relation_type, r.target, r.target_id, r.fragment] for r in doc.relations
        ],
        "relation_diagnostics": [_diag(d) for d in doc.relation_diagnostics],
        # Nested JSON text: loading the pack only scans this string; it is decoded on first use.
        "markdown": None if facts is None else json.dumps(
            _facts(facts), ensure_ascii=False, separators=(",", ":")
        ),
    }


def _layout_of(doc: Document) -> list[int]:
    if doc.parse_error is not None:
        return [0, 0, 0, 1]
    split = split_frontmatter(doc.text)
    return [split.raw_start, split.raw_end, split.body_start, split.body_line]


def decode(path: str, data: bytes, sha256: str, entry: Any) -> Document | None:
    """The cached document for these bytes, or ``None`` when the entry does not fit them."""
    try:
        if not isinstance(entry, dict) or entry["sha256"] != sha256 or entry["size"] != len(data):
            return None
        text = data.decode("utf-8") if entry["parse_error"] is None else ""
        record = FileRecord(path, len(data), sha256)
        if entry["parse_error"] is not None:
            broken = _broken_text(data)
            return Document(
                path=path, kind=_str(entry["kind"]), concept_id=_opt_str(entry["concept_id"]),
                record=record, text=broken, frontmatter_raw=None, frontmatter_value=None,
                body_start=len(broken), body_line=1, line_count=count_lines(broken),
                rules=OKF_RULES, parse_error=_undiag(entry["parse_error"]),
            )
        frontmatter = entry["frontmatter"]
        layout = _layout(text, entry["layout"], frontmatter is not None)
        if layout is None or not (frontmatter is None or isinstance(frontmatter, dict)):
            return None
        raw_start, raw_end, body_start, body_line = layout
        return Document(
            path=path,
            kind=_str(entry["kind"]),
            concept_id=_opt_str(entry["concept_id"]),
            record=record,
            text=text,
            frontmatter_raw=None if frontmatter is None else text[raw_start:raw_end],
            frontmatter_value=None if frontmatter is None else Unfrozen(frontmatter),
            body_start=body_start,
            body_line=body_line,
            line_count=count_lines(text),
            rules=_rules(entry["markdown"]),
            relations=tuple(
                Relation(_str(a), _str(b), _str(c), _str(d), _opt_str(e))
                for a, b, c, d, e in entry["relations"]
            ),
            relation_diagnostics=tuple(_undiag(d) for d in entry["relation_diagnostics"]),
        )
    except (KeyError, TypeError, ValueError, IndexError, UnicodeDecodeError):
        return None


def _layout(text: str, value: Any, has_frontmatter: bool) -> tuple[int, int, int, int] | None:
    """The cached block offsets, checked against the text they claim to describe.

    The delimiter lines must sit exactly where the entry says, and the body line must be the
    number of line breaks before the body plus one: an entry that does not fit is not used.
    """
    raw_start, raw_end, body_start, body_line = (_int(v) for v in value)
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


def _diag(d: Diagnostic) -> list[Any]:
    return [d.code, d.severity, d.message, d.file, d.line, d.field]


def _undiag(value: Any) -> Diagnostic:
    code, severity, message, file, line, field = value
    if line is not None and not isinstance(line, int):
        raise TypeError("line")
    return Diagnostic(code=_str(code), severity=_str(severity), message=_str(message),
                      file=_opt_str(file), line=line, field=_opt_str(field))


def _facts(facts: MarkdownFacts) -> dict[str, Any]:
    return {
        "links": [[x.raw, x.line, x.target, x.concept_id, x.fragment, x.is_directory]
                  for x in facts.links],
        "sections": [[s.index, s.heading, s.level, s.anchor, s.line_start, s.line_end,
                      list(s.breadcrumb)] for s in facts.sections],
        "refs": [[r.label, r.line] for r in facts.footnote_refs],
        "defs": [[d.label, d.line, d.text] for d in facts.footnote_defs],
    }


def _rules(text: Any) -> FormatRules:
    """The loader's rules, with the Markdown facts read from the entry when it holds them."""
    if text is None:
        return OKF_RULES
    if not isinstance(text, str):
        raise TypeError("markdown facts must be JSON text")
    return FormatRules(_CachedMarkdown(text), OKF_RULES.fold, OKF_RULES.lines)


class _CachedMarkdown:
    """A document's ``FormatRules.markdown``: the cached facts, decoded on first use."""

    __slots__ = ("_text",)

    def __init__(self, text: str) -> None:
        self._text = text

    def __call__(self, doc: Document) -> MarkdownFacts:
        try:
            return _unfacts(json.loads(self._text))
        except (KeyError, TypeError, ValueError, IndexError):
            return OKF_RULES.markdown(doc)  # a damaged entry: the body is parsed instead


def _unfacts(value: Any) -> MarkdownFacts:
    sections = tuple(
        Section(_int(i), _opt_str(h), _int(lv), _opt_str(a), _int(s), _int(e),
                tuple(_str(b) for b in crumbs))
        for i, h, lv, a, s, e, crumbs in value["sections"]
    )
    return MarkdownFacts(
        links=tuple(
            Link(_str(r), _int(n), _opt_str(t), _opt_str(c), _opt_str(f), bool(d))
            for r, n, t, c, f, d in value["links"]
        ),
        sections=sections,
        anchors=frozenset(s.anchor for s in sections if s.anchor is not None),
        footnote_refs=tuple(FootnoteRef(_str(a), _int(n)) for a, n in value["refs"]),
        footnote_defs=tuple(FootnoteDef(_str(a), _int(n), _str(t)) for a, n, t in value["defs"]),
    )


def _str(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError("expected a string")
    return value


def _opt_str(value: Any) -> str | None:
    return None if value is None else _str(value)


def _int(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError("expected an integer")
    return value
