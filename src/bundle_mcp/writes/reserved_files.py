"""The reserved files a bundle edit writes: a folder's ``index.md`` (OKF §8) and ``log.md`` (§9).

``index.md`` is regenerated from the folder's concepts: one heading per concept ``type``
(sorted), an entry ``* [Title](file.md) - description`` per concept (sorted by title, then ID),
and a last ``Folders`` heading listing the subfolders that hold concepts (``* [name](name/)``).
What the old file has above its first list is kept as it is (the root's frontmatter with its
``okf_version``, a title, prose), except a heading right above that list, which headed the old
list and goes with it; the groups are then one level below the last heading kept.

``log.md`` gets a ``* <entry>`` bullet under the ``## YYYY-MM-DD`` heading of its date: after
that group's last line when the heading exists, else in a new group placed so that dates stay
newest first; a missing log is created with a ``# Log`` title. Line ends follow the file's own.
"""

from __future__ import annotations

import re

from markdown_it.token import Token

from ..model import Document, Snapshot
from ..okf.markdown import markdown_parser
from .link_edit import encode_path

__all__ = ["FOLDERS_HEADING", "appended_log", "dropped_index_entries", "regenerated_index"]

FOLDERS_HEADING = "Folders"
LOG_TITLE = "# Log"
_HEADING_LINE = re.compile(r" {0,3}#{1,6}(?:[ \t]|$)")
_BULLET = re.compile(r"[*+-][ \t]+")
_SPACES = re.compile(r"\s+")


def _newline(text: str) -> str:
    return "\r\n" if "\r\n" in text else "\n"


def _one_line(value: str) -> str:
    return _SPACES.sub(" ", value).strip()


def _link_text(value: str) -> str:
    """A title as link text: brackets and backslashes escaped, on one line."""
    return re.sub(r"([\[\]\\`*_<])", r"\\\1", _one_line(value))


# ---------------------------------------------------------------------------- index.md


def regenerated_index(snapshot: Snapshot, folder: str, current: Document | None) -> str | None:
    """The new ``index.md`` of ``folder`` in ``snapshot``; ``None`` when the folder holds no
    concept and no folder with concepts (an index would list nothing)."""
    groups: dict[str, list[tuple[str, str, str]]] = {}
    subfolders: set[str] = set()
    prefix = folder + "/" if folder else ""
    for concept_id, doc in snapshot.concepts.items():
        if not concept_id.startswith(prefix):
            continue
        rest = concept_id[len(prefix):]
        if "/" in rest:
            subfolders.add(rest.split("/", 1)[0])
            continue
        kind = doc.fm.get("type")
        title = doc.fm.get("title")
        description = doc.fm.get("description")
        name = _one_line(title) if isinstance(title, str) and title.strip() else rest
        entry = f"* [{_link_text(name)}]({encode_path(rest + '.md')})"
        if isinstance(description, str) and description.strip():
            entry += " - " + _one_line(description)
        group = _one_line(kind) if isinstance(kind, str) and kind.strip() else "Concepts"
        groups.setdefault(group, []).append((name.casefold(), rest, entry))
    if not groups and not subfolders:
        return None
    kept, level = _kept_preamble(current)
    marks = "#" * level
    lines: list[str] = []
    for group in sorted(groups, key=lambda g: (g.casefold(), g)):
        lines += [f"{marks} {group}", ""]
        lines += [entry for _, _, entry in sorted(groups[group])]
        lines.append("")
    if subfolders:
        lines += [f"{marks} {FOLDERS_HEADING}", ""]
        lines += [f"* [{_link_text(name)}]({encode_path(name)}/)" for name in sorted(subfolders)]
        lines.append("")
    newline = _newline(current.text) if current is not None else "\n"
    generated = newline.join(lines[:-1]) + newline
    return kept + generated


def _kept_preamble(current: Document | None) -> tuple[str, int]:
    """What of the old file stays (its text up to its first list, less the heading right above
    that list) and the level the generated headings take."""
    if current is None:
        return "", 1
    body = current.body
    tokens = markdown_parser().parse(body) if body else []
    lines = body.splitlines(keepends=True)
    cut = len(lines)
    last_heading: tuple[int, int] | None = None  # (line index, level) of the last one above
    for i, tok in enumerate(tokens):
        if tok.level != 0 or tok.map is None:
            continue
        if tok.type == "heading_open":
            last_heading = (tok.map[0], int(tok.tag[1:]))
        elif tok.type in ("bullet_list_open", "ordered_list_open"):
            cut = tok.map[0]
            if last_heading is not None and _only_blank(lines, last_heading[0] + 1, cut):
                cut = last_heading[0]
                last_heading = _last_heading_before(tokens[:i], cut)
            break
    else:
        last_heading = _last_heading_before(tokens, cut)
    kept_body = "".join(lines[:cut]).rstrip()
    newline = _newline(current.text)
    head = current.text[: current.body_start]
    kept = head + (kept_body + newline + newline if kept_body else "")
    level = 1 if last_heading is None else min(6, last_heading[1] + 1)
    return kept, level


def _only_blank(lines: list[str], start: int, stop: int) -> bool:
    return all(not line.strip() for line in lines[start:stop])


def _last_heading_before(tokens: list[Token], cut: int) -> tuple[int, int] | None:
    found = None
    for tok in tokens:
        if (tok.type == "heading_open" and tok.level == 0 and tok.map is not None
                and tok.map[0] < cut):
            found = (tok.map[0], int(tok.tag[1:]))
    return found


def dropped_index_entries(doc: Document, hrefs: set[str]) -> str:
    """``doc`` (an ``index.md``) without the top-level list entries whose first link is one of
    ``hrefs`` (each entry's lines removed whole)."""
    body = doc.body
    tokens = markdown_parser().parse(body) if body else []
    lines = body.splitlines(keepends=True)
    drop: set[int] = set()
    depth = 0
    for i, tok in enumerate(tokens):
        if tok.type in ("bullet_list_open", "ordered_list_open"):
            depth += 1
        elif tok.type in ("bullet_list_close", "ordered_list_close"):
            depth -= 1
        elif tok.type == "list_item_open" and depth == 1 and tok.map is not None:
            inline = next((t for t in tokens[i:] if t.type == "inline"), None)
            href = None
            for child in (inline.children or []) if inline is not None else []:
                if child.type == "link_open":
                    value = child.attrs.get("href")
                    href = value if isinstance(value, str) else None
                    break
            if href in hrefs:
                end = tok.map[1]
                # a blank line closing a loose item belongs to the next item, not this one
                while end > tok.map[0] + 1 and not lines[end - 1].strip():
                    end -= 1
                drop.update(range(tok.map[0], end))
    if not drop:
        return doc.text
    kept = "".join(line for n, line in enumerate(lines) if n not in drop)
    return doc.text[: doc.body_start] + kept


# ---------------------------------------------------------------------------- log.md


def appended_log(current: Document | None, date: str, entry: str) -> str:
    """``current``'s text (or a new log) with ``* entry`` under the ``## date`` heading (a
    bullet marker the entry already starts with is not doubled)."""
    entry = _BULLET.sub("", entry.strip(), count=1) if _BULLET.match(entry.strip()) else entry
    if current is None:
        return f"{LOG_TITLE}\n\n## {date}\n\n* {entry}\n"
    text = current.text
    newline = _newline(text)
    head, body = text[: current.body_start], current.body
    lines = body.splitlines(keepends=True)
    headings = _date_headings(lines)
    bullet = f"* {entry}{newline}"
    same = next((i for i, (_, d) in enumerate(headings) if d == date), None)
    if same is not None:
        start = headings[same][0]
        stop = headings[same + 1][0] if same + 1 < len(headings) else len(lines)
        stop = _next_heading(lines, start + 1, stop)
        last = stop
        while last > start + 1 and not lines[last - 1].strip():
            last -= 1
        marker = _marker(lines[start + 1:last])
        bullet = f"{marker} {entry}{newline}"
        before = lines[:last]
        if before and not before[-1].endswith(("\n", "\r")):
            before[-1] += newline
        return head + "".join(before) + bullet + "".join(lines[last:])
    group = [f"## {date}{newline}", newline, bullet]
    older = next((n for n, d in headings if d < date), None)
    if older is not None:
        return head + "".join(lines[:older]) + "".join(group) + newline + "".join(lines[older:])
    out = "".join(lines).rstrip("\r\n")
    if out:
        out += newline + newline
    return head + out + "".join(group)


def _date_headings(lines: list[str]) -> list[tuple[int, str]]:
    """(line index, date) of each level-2 date heading outside code, in file order."""
    body = "".join(lines)
    tokens = markdown_parser().parse(body) if body else []
    found: list[tuple[int, str]] = []
    for i, tok in enumerate(tokens):
        if tok.type == "heading_open" and tok.tag == "h2" and tok.level == 0 and tok.map:
            text = tokens[i + 1].content.strip()
            found.append((tok.map[0], text))
    return found


def _next_heading(lines: list[str], start: int, stop: int) -> int:
    """The first heading line (any level) of ``lines[start:stop]``, else ``stop``: a group ends
    where the next heading starts."""
    for n in range(start, stop):
        if _HEADING_LINE.match(lines[n].rstrip("\r\n")):
            return n
    return stop


def _marker(group: list[str]) -> str:
    for line in group:
        if line[:2] in ("- ", "* ", "+ "):
            return line[0]
    return "*"
